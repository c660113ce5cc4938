-------------------------- MODULE ThreadClaimLapse --------------------------
(***************************************************************************)
(* A thread's claim, with leases that lapse while their holders live.     *)
(*                                                                         *)
(* ADR-0069: a stalled write or a skewed clock lets a lease lapse under a  *)
(* live holder.  Without a fence, the next claimant plans the same message *)
(* and both runs start (I1 and I3 broken).  With FENCE, the writes that    *)
(* consume (run_started, answer_given, steering_given) and run_abandoned   *)
(* are made only while the writer's claim marker is the newest on          *)
(* threads.T.claim: the marker's sequence is the fencing token, and no     *)
(* clock is involved.                                                      *)
(*                                                                         *)
(* The claim is its real steps (DESIGN 3): Acquire the lease, ReadClaim    *)
(* the claim subject's last sequence, Claim (append thread_claimed         *)
(* expecting it), Load the thread up to the marker and plan.  Messages are *)
(* posted over time; a claim may start several runs, one after another,   *)
(* and a run may ask, be answered and be steered several times.           *)
(*                                                                         *)
(* Leases are per-runner sessions: a thread's lease names its holder's     *)
(* session, only the session key is renewed, and when a session lapses    *)
(* every lease naming it lapses at once.  With one thread, the lapse of   *)
(* the holder's session is the lapse of the thread's lease: Lapse below.  *)
(*                                                                         *)
(* The Go transcription in threadclaimlapse.go uses the same variable,    *)
(* action, invariant and property names; drift_test.go holds them         *)
(* together.                                                               *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC

CONSTANTS
    Procs,      \* the claimants (runners)
    NumMsgs,    \* messages 1..NumMsgs may be posted; consumed oldest first
    MaxClaims,  \* Claim appends markers up to this sequence: keeps the model finite
    MaxOpen,    \* requests a run may have open at once
    FENCE,      \* TRUE: consuming writes need the newest claim marker (ADR-0069)
    LEASEFENCE, \* TRUE: the fence checks the writer's lease instead, read before the write
    FORGER,     \* TRUE: a writer with runner credentials forges consuming events and claims
    GUARD,      \* TRUE: each consuming write also checks the run subject (the guard batch)
    RUNFENCE,   \* TRUE: claims on the run subject, every holder write a CAS on it
    OLD,        \* with RUNFENCE, the claimants that still run the old protocol
    NoProc      \* a model value: the lease's holder when it has none

ASSUME /\ Procs # {}
       /\ NoProc \notin Procs
       /\ NumMsgs \in Nat \ {0}
       /\ MaxClaims \in Nat \ {0}
       /\ MaxOpen \in Nat \ {0}
       /\ FENCE \in BOOLEAN
       /\ LEASEFENCE \in BOOLEAN
       /\ FORGER \in BOOLEAN
       /\ GUARD \in BOOLEAN
       /\ RUNFENCE \in BOOLEAN
       /\ OLD \subseteq Procs
       /\ OLD # {} => RUNFENCE

Msgs == 1..NumMsgs

\* Each run consumes its prompt, so there are at most NumMsgs runs; a run is
\* named by the order it started in.
RunIds == 1..NumMsgs

PCs == {"idle", "leased", "marking", "loading", "abandon", "holding", "running"}

RunStates == {"none", "active", "ended", "abandoned"}

VARIABLES
    lease,      \* the KV lease's holder (the session it names), or NoProc
    leaseLive,  \* FALSE once the holder's session lapsed: TTL expiry or a skewed clock
    claimSeq,   \* sequence of the last event on threads.T.claim (0: none)
    posted,     \* messages 1..posted have been posted
    taken,      \* the taken cursor: the newest message consumed
    consumed,   \* consumed[m]: how many writes consumed message m
    rejectPosts, \* the pending messages posted under the reject strategy (PostIdle)
    runs,       \* runs[r]: the state of run r
    runClaim,   \* runClaim[r]: the claim sequence run r started under
    reqs,       \* reqs[r]: run r's requests not yet answered
    asked,      \* asked[r]: requests run r opened (a ghost: request_opened events)
    answered,   \* answered[r]: answers given to run r (a ghost: answer_given events)
    pc,         \* pc[p]: where claimant p is in its turn
    mySeq,      \* mySeq[p]: the marker p appended, its fencing token (0: none)
    readSeq,    \* readSeq[p]: the claim subject's last sequence as p read it
    seen,       \* seen[p]: taken as p loaded it, moved by its own writes
    myRun,      \* myRun[p]: the run p started and has not ended (0: none)
    leaseOK,    \* leaseOK[p]: with LEASEFENCE, p's last read of its lease: its and live
    runCur,     \* runCur[p]: with Track, p knows the run subject's last sequence
    honestDup,  \* ghost, with FORGER: an honest write consumed a message consumed before
    honestTwoRuns, \* ghost, with FORGER: an honest run_started landed while a run was active
    oldSeq      \* with OLD, the newest marker on threads.T.claim (an old process's)

vars == <<lease, leaseLive, claimSeq, posted, taken, consumed, rejectPosts, runs,
          runClaim, reqs, asked, answered, pc, mySeq, readSeq, seen, myRun, leaseOK,
          runCur, honestDup, honestTwoRuns, oldSeq>>

leaseVars == <<lease, leaseLive>>
msgVars == <<posted, taken, consumed, rejectPosts>>
runVars == <<runs, runClaim, reqs, asked, answered>>
procVars == <<pc, mySeq, readSeq, seen, myRun, leaseOK, runCur>>
ghostVars == <<honestDup, honestTwoRuns>>
claimVars == <<claimSeq, oldSeq>>

-----------------------------------------------------------------------------

ActiveRuns == {r \in RunIds : runs[r] = "active"}

NRuns == Cardinality({r \in RunIds : runs[r] # "none"})

\* The write's fence: the newest claim marker in storage is the writer's own.
Newest(p) == claimSeq = mySeq[p]

\* With OLD: p runs the old protocol (claims and fence on the claim
\* subject, no guard), and sees only the markers there: OldNewest.
Old(p) == p \in OLD
OldNewest(p) == oldSeq = mySeq[p]

\* Without FENCE a consuming write checks nothing (the bug ADR-0069 fixes).
\* With LEASEFENCE it checks what p last read of its lease (CheckLease): a
\* KV read cannot be atomic with a stream append, so that view may be
\* stale when the write lands.
\* With RUNFENCE the fence is the write's compare-and-set on the run
\* subject; with GUARD the claim fence and the guard's check on the run
\* subject, in one atomic batch.
Fenced(p) ==
    IF LEASEFENCE THEN leaseOK[p]
    ELSE IF Old(p) THEN OldNewest(p)
    ELSE IF RUNFENCE THEN runCur[p]
    ELSE FENCE => (Newest(p) /\ (GUARD => runCur[p]))

\* The fence refuses p's write.
Refused(p) ==
    IF LEASEFENCE THEN ~leaseOK[p]
    ELSE IF Old(p) THEN ~OldNewest(p)
    ELSE IF RUNFENCE THEN ~runCur[p]
    ELSE FENCE /\ ~(Newest(p) /\ (GUARD => runCur[p]))

\* The run subject's last sequence is tracked (runCur): with GUARD or
\* RUNFENCE.  Untracked, runCur stays FALSE.
Track == RUNFENCE \/ GUARD

\* p's write lands on the run subject: p learns its sequence from the
\* ack, and no one else knows the last one now.
RunWrite(p) == runCur' = IF Track THEN [q \in Procs |-> q = p] ELSE runCur

\* The check of request_opened, run_output and the run's end: a compare-
\* and-set on the run subject.  Untracked, the model takes it as "the run
\* is still active" (only its abandon moves the run subject under the
\* holder); tracked, it is the compare-and-set itself.
EndCAS(p) == IF Track THEN runCur[p] ELSE runs[myRun[p]] = "active"

\* thread_claimed's compare-and-set: on the claim subject, or with RUNFENCE
\* on the run subject.  thread_released's: on p's own marker, or with
\* RUNFENCE on the run subject as p knows it.
ClaimCAS(p) ==
    IF Old(p) THEN oldSeq = readSeq[p]
    ELSE IF RUNFENCE THEN runCur[p] ELSE claimSeq = readSeq[p]
ReleaseCAS(p) ==
    IF Old(p) THEN OldNewest(p)
    ELSE IF RUNFENCE THEN runCur[p] ELSE Newest(p)

\* A message p knows to be untaken has been posted.
Pending(p) == seen[p] < posted

\* I4: a claimant whose write was refused hands the thread over.
DropProc(p) ==
    /\ pc' = [pc EXCEPT ![p] = "idle"]
    /\ mySeq' = [mySeq EXCEPT ![p] = 0]
    /\ readSeq' = [readSeq EXCEPT ![p] = 0]
    /\ seen' = [seen EXCEPT ![p] = 0]
    /\ myRun' = [myRun EXCEPT ![p] = 0]
    /\ leaseOK' = [leaseOK EXCEPT ![p] = FALSE]
Drop(p) ==
    /\ DropProc(p)
    /\ runCur' = [runCur EXCEPT ![p] = FALSE]

\* Consume message m and move the taken cursor to it.  How m was posted is
\* forgotten: RejectOnlyIdle looks at the post alone.  The ghost is kept
\* with a forger only: without one every write is honest, and I1 says it.
Consume(p, m) ==
    /\ honestDup' = (honestDup \/ (FORGER /\ consumed[m] > 0))
    /\ taken' = m
    /\ consumed' = [consumed EXCEPT ![m] = @ + 1]
    /\ seen' = [seen EXCEPT ![p] = m]
    /\ rejectPosts' = rejectPosts \ {m}

-----------------------------------------------------------------------------

Init ==
    /\ lease = NoProc
    /\ leaseLive = FALSE
    /\ claimSeq = 0
    /\ posted = 0
    /\ taken = 0
    /\ consumed = [m \in Msgs |-> 0]
    /\ rejectPosts = {}
    /\ runs = [r \in RunIds |-> "none"]
    /\ runClaim = [r \in RunIds |-> 0]
    /\ reqs = [r \in RunIds |-> 0]
    /\ asked = [r \in RunIds |-> 0]
    /\ answered = [r \in RunIds |-> 0]
    /\ pc = [p \in Procs |-> "idle"]
    /\ mySeq = [p \in Procs |-> 0]
    /\ readSeq = [p \in Procs |-> 0]
    /\ seen = [p \in Procs |-> 0]
    /\ myRun = [p \in Procs |-> 0]
    /\ leaseOK = [p \in Procs |-> FALSE]
    /\ runCur = [p \in Procs |-> FALSE]
    /\ honestDup = FALSE
    /\ honestTwoRuns = FALSE
    /\ oldSeq = 0

\* message_posted: a client posts the next message, at any time.
Post ==
    /\ posted < NumMsgs
    /\ posted' = posted + 1
    /\ UNCHANGED <<lease, leaseLive, claimVars, taken, consumed, rejectPosts, runs,
                   runClaim, reqs, asked, answered, pc, mySeq, readSeq, seen, myRun,
                   leaseOK, runCur, ghostVars>>

\* message_posted under the reject strategy (issue 15): the post carries a
\* check on the thread's run subject, read when the poster saw no run active,
\* so it lands only while no run is active.  The message is recorded as
\* posted under reject, which RejectOnlyIdle checks.
PostIdle ==
    /\ ActiveRuns = {}
    /\ posted < NumMsgs
    /\ posted' = posted + 1
    /\ rejectPosts' = rejectPosts \cup {posted + 1}
    /\ UNCHANGED <<lease, leaseLive, claimVars, taken, consumed, runs, runClaim,
                   reqs, asked, answered, pc, mySeq, readSeq, seen, myRun, leaseOK,
                   runCur, ghostVars>>

\* The other events of the strategies and cancel change nothing the spec
\* models: thread_configured and cancel_requested (clients, on the posted
\* subject) and run_interrupted (the holder, a compare-and-set on the run
\* subject, like run_output) are stutters; the run they cancel ends by
\* RunEnd (run_failed "cancelled" or "interrupted"), and the run that follows
\* starts by RunStart.

\* Claim, step 1: acquire the lease when it is free, lapsed, or already
\* p's own session's (a session lease is acquired again by its session).
\* One conjunct, not "lease = NoProc \/ ~leaseLive \/ lease = p": a free
\* lease is never live, and TLC counts each true disjunct's successor.
Acquire(p) ==
    /\ pc[p] = "idle"
    /\ ~(leaseLive /\ lease # p)
    /\ lease' = p
    /\ leaseLive' = TRUE
    /\ pc' = [pc EXCEPT ![p] = "leased"]
    /\ UNCHANGED <<claimVars, msgVars, runVars, mySeq, readSeq, seen, myRun, leaseOK,
                   runCur, ghostVars>>

\* Claim, step 2: read the claim subject's last sequence (with RUNFENCE,
\* the run subject's: p knows it, and the newest marker in it).
ReadClaim(p) ==
    /\ pc[p] = "leased"
    /\ readSeq' = [readSeq EXCEPT ![p] = IF Old(p) THEN oldSeq ELSE claimSeq]
    /\ runCur' = IF RUNFENCE /\ ~Old(p) THEN [runCur EXCEPT ![p] = TRUE] ELSE runCur
    /\ pc' = [pc EXCEPT ![p] = "marking"]
    /\ UNCHANGED <<leaseVars, claimVars, msgVars, runVars, mySeq, seen, myRun, leaseOK,
                   ghostVars>>

\* Claim, step 3: append thread_claimed expecting what p read (compare-
\* and-set on the claim subject; with RUNFENCE, on the run subject).  On a
\* conflict, read again while the lease is still p's (its renewal's
\* compare-and-set), else let go.
Claim(p) ==
    /\ pc[p] = "marking"
    /\ claimSeq < MaxClaims
    /\ IF ClaimCAS(p)
         THEN /\ claimSeq' = claimSeq + 1
              /\ oldSeq' = IF Old(p) THEN claimSeq + 1 ELSE oldSeq
              /\ mySeq' = [mySeq EXCEPT ![p] = claimSeq + 1]
              /\ pc' = [pc EXCEPT ![p] = "loading"]
              /\ IF RUNFENCE /\ ~Old(p) THEN RunWrite(p) ELSE UNCHANGED runCur
              /\ UNCHANGED <<readSeq, seen, myRun, leaseOK>>
         ELSE /\ UNCHANGED claimVars
              /\ IF lease = p
                   THEN /\ pc' = [pc EXCEPT ![p] = "leased"]
                        /\ UNCHANGED <<mySeq, readSeq, seen, myRun, leaseOK, runCur>>
                   ELSE Drop(p)
    /\ UNCHANGED <<leaseVars, msgVars, runVars, ghostVars>>

\* Claim, step 4: load the thread up to at least p's marker, so every
\* consuming write that landed before it is known, and plan: abandon an
\* older claim's active run first, or hold the thread.  Tracked, the load
\* reads the run subject to its end in the same read: p knows its last
\* sequence, unless a newer marker than p's own is in it.
Load(p) ==
    /\ pc[p] = "loading"
    /\ seen' = [seen EXCEPT ![p] = taken]
    /\ runCur' = IF Track
                 THEN [runCur EXCEPT ![p] = IF Old(p) THEN OldNewest(p) ELSE Newest(p)]
                 ELSE runCur
    /\ pc' = [pc EXCEPT ![p] = IF ActiveRuns # {} THEN "abandon" ELSE "holding"]
    /\ UNCHANGED <<leaseVars, claimVars, msgVars, runVars, mySeq, readSeq, myRun, leaseOK,
                   ghostVars>>

\* The holder's session lapses while its holder lives: a write in flight
\* past the TTL, or a clock that runs ahead of the holder's.  Every lease
\* naming the session lapses with it; here, the thread's.  The holder is
\* not told.
Lapse ==
    /\ lease # NoProc
    /\ leaseLive
    /\ leaseLive' = FALSE
    /\ UNCHANGED <<lease, claimVars, msgVars, runVars, procVars, ghostVars>>

\* The holder renews its session (compare-and-set on the session key's
\* revision).  It succeeds while no one else took the lease and the
\* session has not lapsed: the renewal of an expired session key fails.
\* The model has no TTL, so a renewal changes nothing it sees; a renewal
\* that revived a lapsed session would (a liveness bug: the mutation table).
Renew(p) ==
    /\ pc[p] # "idle"
    /\ lease = p
    /\ leaseLive
    /\ leaseLive' = TRUE
    /\ UNCHANGED <<lease, claimVars, msgVars, runVars, procVars, ghostVars>>

\* thread_released, compare-and-set on p's own marker, then the lease is
\* deleted if it is still p's.  If a newer marker exists the release is
\* refused and writes nothing; either way p lets go.  With RUNFENCE the
\* release is on the run subject: once it lands no one knows its last
\* sequence.
Release(p) ==
    /\ pc[p] = "holding"
    /\ IF ReleaseCAS(p)
         THEN /\ claimSeq' = claimSeq + 1
              /\ oldSeq' = IF Old(p) THEN claimSeq + 1 ELSE oldSeq
              /\ lease' = IF lease = p THEN NoProc ELSE lease
              /\ leaseLive' = IF lease = p THEN FALSE ELSE leaseLive
         ELSE UNCHANGED <<claimVars, lease, leaseLive>>
    /\ DropProc(p)
    /\ runCur' = IF RUNFENCE /\ ~Old(p) /\ ReleaseCAS(p) THEN [q \in Procs |-> FALSE]
                 ELSE [runCur EXCEPT ![p] = FALSE]
    /\ UNCHANGED <<msgVars, runVars, ghostVars>>

\* run_abandoned, fenced: the active run an older claim started.
Abandon(p) ==
    /\ pc[p] = "abandon"
    /\ Fenced(p)
    /\ runs' = [r \in RunIds |-> IF runs[r] = "active" THEN "abandoned" ELSE runs[r]]
    /\ pc' = [pc EXCEPT ![p] = "holding"]
    /\ RunWrite(p)
    /\ UNCHANGED <<leaseVars, claimVars, msgVars, runClaim, reqs, asked, answered,
                   mySeq, readSeq, seen, myRun, leaseOK, ghostVars>>

\* run_started, fenced: consumes the oldest message p knows untaken and
\* opens run NRuns + 1.  NRuns < NumMsgs bounds the model; with the fence
\* it never binds, each run consuming a message of its own.
RunStart(p) ==
    /\ pc[p] = "holding"
    /\ Pending(p)
    /\ Fenced(p)
    /\ NRuns < NumMsgs
    /\ Consume(p, seen[p] + 1)
    /\ honestTwoRuns' = (honestTwoRuns \/ (FORGER /\ ActiveRuns # {}))
    /\ runs' = [runs EXCEPT ![NRuns + 1] = "active"]
    /\ runClaim' = [runClaim EXCEPT ![NRuns + 1] = mySeq[p]]
    /\ myRun' = [myRun EXCEPT ![p] = NRuns + 1]
    /\ pc' = [pc EXCEPT ![p] = "running"]
    /\ RunWrite(p)
    /\ UNCHANGED <<leaseVars, claimVars, posted, reqs, asked, answered, mySeq,
                   readSeq, leaseOK>>

\* The fence refuses run_abandoned or run_started: nothing is written, the
\* start consumes nothing, and p hands over (I4).
StartFenced(p) ==
    /\ Refused(p)
    /\ \/ pc[p] = "abandon"
       \/ pc[p] = "holding" /\ Pending(p)
    /\ Drop(p)
    /\ UNCHANGED <<leaseVars, claimVars, msgVars, runVars, ghostVars>>

\* request_opened: compare-and-set on the run subject, so refused once the
\* run was abandoned (p learns it at RunEnd).
Ask(p) ==
    /\ pc[p] = "running"
    /\ EndCAS(p)
    /\ reqs[myRun[p]] < MaxOpen
    /\ reqs' = [reqs EXCEPT ![myRun[p]] = @ + 1]
    /\ asked' = [asked EXCEPT ![myRun[p]] = @ + 1]
    /\ RunWrite(p)
    /\ UNCHANGED <<leaseVars, claimVars, msgVars, runs, runClaim, answered, pc, mySeq,
                   readSeq, seen, myRun, leaseOK, ghostVars>>

\* answer_given, fenced: the next message answers an open request, which
\* it closes.
Reply(p) ==
    /\ pc[p] = "running"
    /\ reqs[myRun[p]] > 0
    /\ Pending(p)
    /\ Fenced(p)
    /\ Consume(p, seen[p] + 1)
    /\ reqs' = [reqs EXCEPT ![myRun[p]] = @ - 1]
    /\ answered' = [answered EXCEPT ![myRun[p]] = @ + 1]
    /\ RunWrite(p)
    /\ UNCHANGED <<leaseVars, claimVars, posted, runs, runClaim, asked, pc, mySeq,
                   readSeq, myRun, leaseOK, honestTwoRuns>>

\* steering_given, fenced: the next message is handed to the running run.
\* The core answers an open request first; allowing either only adds
\* behaviours.
Steer(p) ==
    /\ pc[p] = "running"
    /\ Pending(p)
    /\ Fenced(p)
    /\ Consume(p, seen[p] + 1)
    /\ RunWrite(p)
    /\ UNCHANGED <<leaseVars, claimVars, posted, runVars, pc, mySeq, readSeq, myRun,
                   leaseOK, honestTwoRuns>>

\* The fence refuses answer_given or steering_given: nothing is consumed,
\* and p hands over.
ReplyFenced(p) ==
    /\ pc[p] = "running"
    /\ Pending(p)
    /\ Refused(p)
    /\ Drop(p)
    /\ UNCHANGED <<leaseVars, claimVars, msgVars, runVars, ghostVars>>

\* run_completed or run_failed: compare-and-set on the run subject, not
\* fenced.  Refused once the run was abandoned; then p learns it lost the
\* thread and lets go.  Otherwise p holds the thread and may start another.
RunEnd(p) ==
    /\ pc[p] = "running"
    /\ IF EndCAS(p)
         THEN /\ runs' = [runs EXCEPT ![myRun[p]] = "ended"]
              /\ myRun' = [myRun EXCEPT ![p] = 0]
              /\ pc' = [pc EXCEPT ![p] = "holding"]
              /\ RunWrite(p)
              /\ UNCHANGED <<mySeq, readSeq, seen, leaseOK>>
         ELSE /\ UNCHANGED runs
              /\ Drop(p)
    /\ UNCHANGED <<leaseVars, claimVars, msgVars, runClaim, reqs, asked, answered,
                   ghostVars>>

\* With LEASEFENCE, p reads its lease before a fenced write (a KV get):
\* whether it is still p's and live.  The write lands later, whatever
\* happened to the lease in between.  Without LEASEFENCE the fence is the
\* append's own check on the claim subject, and nothing is read apart.
CheckLease(p) ==
    /\ LEASEFENCE
    /\ pc[p] \in {"abandon", "holding", "running"}
    /\ leaseOK' = [leaseOK EXCEPT ![p] = (lease = p /\ leaseLive)]
    /\ UNCHANGED <<leaseVars, claimVars, msgVars, runVars, pc, mySeq, readSeq,
                   seen, myRun, runCur, ghostVars>>

\* run_output, tracked only (untracked, a stutter the spec leaves out): a
\* compare-and-set on the run subject, like request_opened, that moves the
\* run subject and changes nothing else.  Refused, it writes nothing.
Output(p) ==
    /\ Track
    /\ pc[p] = "running"
    /\ EndCAS(p)
    /\ RunWrite(p)
    /\ UNCHANGED <<leaseVars, claimVars, msgVars, runVars, pc, mySeq, readSeq, seen,
                   myRun, leaseOK, ghostVars>>

\* Tracked only: p's write was refused because the run subject moved (the
\* guard's ErrRunMoved, or RUNFENCE's compare-and-set); p reads the thread
\* again, finds its marker still the newest, and folds what it had not
\* seen: a forged consumption, or a forged run_started, which it plans to
\* abandon.  Finding a newer marker it stops instead (StartFenced,
\* ReplyFenced, RunEnd's refusal: I4).  A running p goes on only while its
\* run is the one active.
Reread(p) ==
    /\ Track
    /\ ~Old(p)
    /\ ~runCur[p]
    /\ Newest(p)
    /\ \/ pc[p] \in {"abandon", "holding"}
       \/ pc[p] = "running" /\ ActiveRuns = {myRun[p]}
    /\ seen' = [seen EXCEPT ![p] = taken]
    /\ runCur' = [runCur EXCEPT ![p] = TRUE]
    /\ pc' = [pc EXCEPT ![p] = IF pc[p] = "running" THEN "running"
                               ELSE IF ActiveRuns # {} THEN "abandon" ELSE "holding"]
    /\ UNCHANGED <<leaseVars, claimVars, msgVars, runVars, mySeq, readSeq, myRun, leaseOK,
                   ghostVars>>

\* With FORGER, a writer with runner credentials, which knows every
\* sequence and so passes every check the store applies, appends
\* run_started of the oldest pending message, an answer_given or
\* steering_given consuming it (a forged answer is taken as steering: it
\* closes no request), or thread_claimed (on the claim subject, or with
\* RUNFENCE the run subject).  Every forged write but a claim on the claim
\* subject moves the run subject: no holder knows its last sequence now.
\* Its consumptions are not honest: the ghosts stay as they are.
ForgeTake ==
    /\ taken < posted
    /\ taken' = taken + 1
    /\ consumed' = [consumed EXCEPT ![taken + 1] = @ + 1]
    /\ rejectPosts' = rejectPosts \ {taken + 1}
RunMoved == runCur' = IF Track THEN [q \in Procs |-> FALSE] ELSE runCur
Forge ==
    /\ FORGER
    /\ \/ /\ NRuns < NumMsgs
          /\ claimSeq <= MaxClaims
          /\ ForgeTake
          /\ runs' = [runs EXCEPT ![NRuns + 1] = "active"]
          /\ runClaim' = [runClaim EXCEPT ![NRuns + 1] = claimSeq]
          /\ RunMoved
          /\ UNCHANGED <<leaseVars, claimVars, posted, reqs, asked, answered, pc, mySeq,
                         readSeq, seen, myRun, leaseOK, ghostVars>>
       \/ /\ ForgeTake
          /\ RunMoved
          /\ UNCHANGED <<leaseVars, claimVars, posted, runVars, pc, mySeq, readSeq, seen,
                         myRun, leaseOK, ghostVars>>
       \/ /\ claimSeq < MaxClaims
          /\ claimSeq' = claimSeq + 1
          /\ IF RUNFENCE THEN RunMoved ELSE UNCHANGED runCur
          /\ UNCHANGED <<oldSeq, leaseVars, msgVars, runVars, pc, mySeq, readSeq, seen, myRun,
                         leaseOK, ghostVars>>

Next ==
    \/ Post
    \/ PostIdle
    \/ \E p \in Procs : Acquire(p)
    \/ \E p \in Procs : ReadClaim(p)
    \/ \E p \in Procs : Claim(p)
    \/ \E p \in Procs : Load(p)
    \/ Lapse
    \/ \E p \in Procs : Renew(p)
    \/ \E p \in Procs : Release(p)
    \/ \E p \in Procs : Abandon(p)
    \/ \E p \in Procs : RunStart(p)
    \/ \E p \in Procs : StartFenced(p)
    \/ \E p \in Procs : Ask(p)
    \/ \E p \in Procs : Reply(p)
    \/ \E p \in Procs : Steer(p)
    \/ \E p \in Procs : ReplyFenced(p)
    \/ \E p \in Procs : RunEnd(p)
    \/ \E p \in Procs : CheckLease(p)
    \/ \E p \in Procs : Output(p)
    \/ \E p \in Procs : Reread(p)
    \/ Forge

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------

TypeOK ==
    /\ lease \in Procs \cup {NoProc}
    /\ leaseLive \in BOOLEAN
    /\ claimSeq \in 0..(MaxClaims + 1)
    /\ posted \in 0..NumMsgs
    /\ taken \in 0..posted
    /\ consumed \in [Msgs -> 0..MaxClaims]
    /\ rejectPosts \subseteq Msgs
    /\ runs \in [RunIds -> RunStates]
    /\ runClaim \in [RunIds -> 0..MaxClaims]
    /\ reqs \in [RunIds -> 0..MaxOpen]
    /\ asked \in [RunIds -> 0..(NumMsgs + MaxOpen)]
    /\ answered \in [RunIds -> 0..NumMsgs]
    /\ pc \in [Procs -> PCs]
    /\ mySeq \in [Procs -> 0..MaxClaims]
    /\ readSeq \in [Procs -> 0..(MaxClaims + 1)]
    /\ seen \in [Procs -> 0..NumMsgs]
    /\ myRun \in [Procs -> 0..NumMsgs]
    /\ leaseOK \in [Procs -> BOOLEAN]
    /\ runCur \in [Procs -> BOOLEAN]
    /\ honestDup \in BOOLEAN
    /\ honestTwoRuns \in BOOLEAN
    /\ oldSeq \in 0..(MaxClaims + 1)

\* I1: each message is consumed at most once, as a prompt, an answer or
\* steering.
I1_ConsumedAtMostOnce == \A m \in Msgs : consumed[m] <= 1

\* I3: at most one run is active in the thread.
I3_OneActiveRun == Cardinality(ActiveRuns) <= 1

\* Messages are consumed in order and none is passed over: every message
\* up to the taken cursor was consumed exactly once, and none after it.
NoneSkipped == \A m \in Msgs : consumed[m] = IF m <= taken THEN 1 ELSE 0

\* With a forger, I1 and I3 are broken by the forger alone (a forged
\* run_started while a run is active); what the fence must keep is that no
\* HONEST write breaks them.  An honest write consumed no message an earlier
\* write (honest or forged) consumed:
HonestI1 == ~honestDup

\* No honest run_started landed while a run was active:
HonestI3 == ~honestTwoRuns

\* Each request a run opened is open or was answered, once: none is
\* answered twice, nor answered without being open.
AnswerOnce == \A r \in RunIds : answered[r] + reqs[r] = asked[r]

-----------------------------------------------------------------------------
\* Action properties: the audit's rules on real logs (projections/audit),
\* each stated over the steps that write the events it checks.

\* Every fenced write is made under the newest claim marker.
FenceNewestClaim ==
    [][\A p \in Procs :
         (Abandon(p) \/ RunStart(p) \/ Reply(p) \/ Steer(p)) => Newest(p)]_vars

\* thread_claimed lands on the claim sequence its writer read, and
\* thread_released on the releaser's own marker; with RUNFENCE, each also
\* on the run subject's last sequence as its writer knows it.
ClaimChain ==
    [][\A p \in Procs :
         /\ (Claim(p) /\ claimSeq' # claimSeq) =>
                readSeq[p] = claimSeq /\ (RUNFENCE => runCur[p])
         /\ (Release(p) /\ claimSeq' # claimSeq) =>
                Newest(p) /\ (RUNFENCE => runCur[p])]_vars

\* No run ends after it was abandoned, nor takes a request or an answer.
NoEndAfterAbandon ==
    [][\A r \in RunIds :
         runs[r] = "abandoned" =>
             runs'[r] = "abandoned" /\ asked'[r] = asked[r] /\ answered'[r] = answered[r]]_vars

\* Only runs of claims older than the newest are abandoned.
AbandonOnlyOlder ==
    [][\A r \in RunIds :
         (runs[r] # "abandoned" /\ runs'[r] = "abandoned") => runClaim[r] < claimSeq]_vars

\* A message posted under reject is posted while no run is active.
RejectOnlyIdle ==
    [][(rejectPosts' \ rejectPosts # {}) => ActiveRuns = {}]_vars

-----------------------------------------------------------------------------
\* Liveness: every posted message is eventually consumed.  The Go checker
\* (threadclaimlapse_live.go) checks it on the .cfg's constants with the
\* claim sequences renumbered after every step (0 stays 0, the newest
\* becomes 2, the older ones 1), which is a bisimulation and lifts
\* MaxClaims' bound; with the bound, TLC would find every behaviour that
\* runs out of markers with a message pending.

\* The runners' steps, each weakly fair: a runner that can take a step of
\* its turn takes it.  Not Post and Ask (clients and runs need not post or
\* ask), nor Renew and Release (a holder may stop renewing, and keep an
\* idle thread), nor Lapse, the environment's.
RunnerFair(p) ==
    /\ WF_vars(Acquire(p)) /\ WF_vars(ReadClaim(p)) /\ WF_vars(Claim(p))
    /\ WF_vars(Load(p)) /\ WF_vars(Abandon(p)) /\ WF_vars(RunStart(p))
    /\ WF_vars(StartFenced(p)) /\ WF_vars(Reply(p)) /\ WF_vars(Steer(p))
    /\ WF_vars(ReplyFenced(p)) /\ WF_vars(RunEnd(p)) /\ WF_vars(CheckLease(p))
    /\ WF_vars(Reread(p))

Consumed == \A m \in Msgs : (posted >= m) ~> (taken >= m)

\* A holder that releases the thread with a message pending (one it had not
\* seen yet) notices it and claims again; it does not do so forever.
ReleasePending == \E p \in Procs : Release(p) /\ Pending(p)

\* Every runner is fair, and sessions lapse finitely often: a takeover
\* after every lapse, forever, is starvation no fence can stop.  With
\* FORGER, the forger stops at some point: one that forges forever starves
\* any protocol.
Fairness == \A p \in Procs : RunnerFair(p)
EventuallyConsumed ==
    (Spec /\ Fairness /\ <>[][~Lapse /\ ~ReleasePending /\ ~Forge]_vars) => Consumed

\* One holder stalls for good (it takes finitely many steps of its turn)
\* while its renewals go on; the others are fair, and so is Lapse: the
\* stalled holder's session lapses, and the others notice.
StallFairness(stalled) ==
    /\ \A p \in Procs \ {stalled} : RunnerFair(p)
    /\ WF_vars(Lapse)
StalledStep(p) ==
    \/ Acquire(p) \/ ReadClaim(p) \/ Claim(p) \/ Load(p) \/ Abandon(p)
    \/ RunStart(p) \/ StartFenced(p) \/ Reply(p) \/ Steer(p) \/ ReplyFenced(p)
    \/ RunEnd(p) \/ CheckLease(p) \/ Output(p) \/ Reread(p)
EventuallyConsumedStalled ==
    \A s \in Procs :
        (Spec /\ StallFairness(s) /\ <>[][~StalledStep(s) /\ ~ReleasePending /\ ~Forge]_vars)
            => Consumed

=============================================================================
