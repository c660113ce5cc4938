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
    NoProc      \* a model value: the lease's holder when it has none

ASSUME /\ Procs # {}
       /\ NoProc \notin Procs
       /\ NumMsgs \in Nat \ {0}
       /\ MaxClaims \in Nat \ {0}
       /\ MaxOpen \in Nat \ {0}
       /\ FENCE \in BOOLEAN

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
    runs,       \* runs[r]: the state of run r
    runClaim,   \* runClaim[r]: the claim sequence run r started under
    reqs,       \* reqs[r]: run r's requests not yet answered
    pc,         \* pc[p]: where claimant p is in its turn
    mySeq,      \* mySeq[p]: the marker p appended, its fencing token (0: none)
    readSeq,    \* readSeq[p]: the claim subject's last sequence as p read it
    seen,       \* seen[p]: taken as p loaded it, moved by its own writes
    myRun       \* myRun[p]: the run p started and has not ended (0: none)

vars == <<lease, leaseLive, claimSeq, posted, taken, consumed, runs, runClaim,
          reqs, pc, mySeq, readSeq, seen, myRun>>

-----------------------------------------------------------------------------

ActiveRuns == {r \in RunIds : runs[r] = "active"}

NRuns == Cardinality({r \in RunIds : runs[r] # "none"})

\* The write's fence: the newest claim marker in storage is the writer's own.
Newest(p) == claimSeq = mySeq[p]

\* Without FENCE a consuming write checks nothing (the bug ADR-0069 fixes).
Fenced(p) == FENCE => Newest(p)

\* A message p knows to be untaken has been posted.
Pending(p) == seen[p] < posted

\* I4: a claimant whose write was refused hands the thread over.
Drop(p) ==
    /\ pc' = [pc EXCEPT ![p] = "idle"]
    /\ mySeq' = [mySeq EXCEPT ![p] = 0]
    /\ readSeq' = [readSeq EXCEPT ![p] = 0]
    /\ seen' = [seen EXCEPT ![p] = 0]
    /\ myRun' = [myRun EXCEPT ![p] = 0]

\* Consume message m and move the taken cursor to it.
Consume(p, m) ==
    /\ taken' = m
    /\ consumed' = [consumed EXCEPT ![m] = @ + 1]
    /\ seen' = [seen EXCEPT ![p] = m]

-----------------------------------------------------------------------------

Init ==
    /\ lease = NoProc
    /\ leaseLive = FALSE
    /\ claimSeq = 0
    /\ posted = 0
    /\ taken = 0
    /\ consumed = [m \in Msgs |-> 0]
    /\ runs = [r \in RunIds |-> "none"]
    /\ runClaim = [r \in RunIds |-> 0]
    /\ reqs = [r \in RunIds |-> 0]
    /\ pc = [p \in Procs |-> "idle"]
    /\ mySeq = [p \in Procs |-> 0]
    /\ readSeq = [p \in Procs |-> 0]
    /\ seen = [p \in Procs |-> 0]
    /\ myRun = [p \in Procs |-> 0]

\* message_posted: a client posts the next message, at any time.
Post ==
    /\ posted < NumMsgs
    /\ posted' = posted + 1
    /\ UNCHANGED <<lease, leaseLive, claimSeq, taken, consumed, runs, runClaim,
                   reqs, pc, mySeq, readSeq, seen, myRun>>

\* message_posted under the reject strategy (issue 15): the post carries a
\* check on the thread's run subject, read when the poster saw no run active,
\* so it lands only while no run is active. Otherwise it is Post.
PostIdle ==
    /\ ActiveRuns = {}
    /\ Post

\* The other events of the strategies and cancel change nothing the spec
\* models: thread_configured and cancel_requested (clients, on the posted
\* subject) and run_interrupted (the holder, a compare-and-set on the run
\* subject, like run_output) are stutters; the run they cancel ends by
\* RunEnd (run_failed "cancelled" or "interrupted"), and the run that follows
\* starts by RunStart.

\* Claim, step 1: acquire the lease when it is free or lapsed.
Acquire(p) ==
    /\ pc[p] = "idle"
    /\ lease = NoProc \/ ~leaseLive
    /\ lease' = p
    /\ leaseLive' = TRUE
    /\ pc' = [pc EXCEPT ![p] = "leased"]
    /\ UNCHANGED <<claimSeq, posted, taken, consumed, runs, runClaim, reqs,
                   mySeq, readSeq, seen, myRun>>

\* Claim, step 2: read the claim subject's last sequence.
ReadClaim(p) ==
    /\ pc[p] = "leased"
    /\ readSeq' = [readSeq EXCEPT ![p] = claimSeq]
    /\ pc' = [pc EXCEPT ![p] = "marking"]
    /\ UNCHANGED <<lease, leaseLive, claimSeq, posted, taken, consumed, runs,
                   runClaim, reqs, mySeq, seen, myRun>>

\* Claim, step 3: append thread_claimed expecting what p read (compare-
\* and-set on the claim subject).  On a conflict, read again while the
\* lease is still p's (its renewal's compare-and-set), else let go.
Claim(p) ==
    /\ pc[p] = "marking"
    /\ claimSeq < MaxClaims
    /\ IF claimSeq = readSeq[p]
         THEN /\ claimSeq' = claimSeq + 1
              /\ mySeq' = [mySeq EXCEPT ![p] = claimSeq + 1]
              /\ pc' = [pc EXCEPT ![p] = "loading"]
              /\ UNCHANGED <<readSeq, seen, myRun>>
         ELSE /\ UNCHANGED claimSeq
              /\ IF lease = p
                   THEN /\ pc' = [pc EXCEPT ![p] = "leased"]
                        /\ UNCHANGED <<mySeq, readSeq, seen, myRun>>
                   ELSE Drop(p)
    /\ UNCHANGED <<lease, leaseLive, posted, taken, consumed, runs, runClaim, reqs>>

\* Claim, step 4: load the thread up to at least p's marker, so every
\* consuming write that landed before it is known, and plan: abandon an
\* older claim's active run first, or hold the thread.
Load(p) ==
    /\ pc[p] = "loading"
    /\ seen' = [seen EXCEPT ![p] = taken]
    /\ pc' = [pc EXCEPT ![p] = IF ActiveRuns # {} THEN "abandon" ELSE "holding"]
    /\ UNCHANGED <<lease, leaseLive, claimSeq, posted, taken, consumed, runs,
                   runClaim, reqs, mySeq, readSeq, myRun>>

\* The holder's session lapses while its holder lives: a write in flight
\* past the TTL, or a clock that runs ahead of the holder's.  Every lease
\* naming the session lapses with it; here, the thread's.  The holder is
\* not told.
Lapse ==
    /\ lease # NoProc
    /\ leaseLive
    /\ leaseLive' = FALSE
    /\ UNCHANGED <<lease, claimSeq, posted, taken, consumed, runs, runClaim,
                   reqs, pc, mySeq, readSeq, seen, myRun>>

\* The holder renews its session (compare-and-set on the session key's
\* revision).  It succeeds while no one else took the lease, even a lapsed
\* one: safety must not rest on the TTL.
Renew(p) ==
    /\ pc[p] # "idle"
    /\ lease = p
    /\ leaseLive' = TRUE
    /\ UNCHANGED <<lease, claimSeq, posted, taken, consumed, runs, runClaim,
                   reqs, pc, mySeq, readSeq, seen, myRun>>

\* thread_released, compare-and-set on p's own marker, then the lease is
\* deleted if it is still p's.  If a newer marker exists the release is
\* refused and writes nothing; either way p lets go.
Release(p) ==
    /\ pc[p] = "holding"
    /\ IF Newest(p)
         THEN /\ claimSeq' = claimSeq + 1
              /\ lease' = IF lease = p THEN NoProc ELSE lease
              /\ leaseLive' = IF lease = p THEN FALSE ELSE leaseLive
         ELSE UNCHANGED <<claimSeq, lease, leaseLive>>
    /\ Drop(p)
    /\ UNCHANGED <<posted, taken, consumed, runs, runClaim, reqs>>

\* run_abandoned, fenced: the active run an older claim started.
Abandon(p) ==
    /\ pc[p] = "abandon"
    /\ Fenced(p)
    /\ runs' = [r \in RunIds |-> IF runs[r] = "active" THEN "abandoned" ELSE runs[r]]
    /\ pc' = [pc EXCEPT ![p] = "holding"]
    /\ UNCHANGED <<lease, leaseLive, claimSeq, posted, taken, consumed, runClaim,
                   reqs, mySeq, readSeq, seen, myRun>>

\* run_started, fenced: consumes the oldest message p knows untaken and
\* opens run NRuns + 1.  NRuns < NumMsgs bounds the model; with the fence
\* it never binds, each run consuming a message of its own.
RunStart(p) ==
    /\ pc[p] = "holding"
    /\ Pending(p)
    /\ Fenced(p)
    /\ NRuns < NumMsgs
    /\ Consume(p, seen[p] + 1)
    /\ runs' = [runs EXCEPT ![NRuns + 1] = "active"]
    /\ runClaim' = [runClaim EXCEPT ![NRuns + 1] = mySeq[p]]
    /\ myRun' = [myRun EXCEPT ![p] = NRuns + 1]
    /\ pc' = [pc EXCEPT ![p] = "running"]
    /\ UNCHANGED <<lease, leaseLive, claimSeq, posted, reqs, mySeq, readSeq>>

\* The fence refuses run_abandoned or run_started: nothing is written, the
\* start consumes nothing, and p hands over (I4).
StartFenced(p) ==
    /\ FENCE
    /\ ~Newest(p)
    /\ \/ pc[p] = "abandon"
       \/ pc[p] = "holding" /\ Pending(p)
    /\ Drop(p)
    /\ UNCHANGED <<lease, leaseLive, claimSeq, posted, taken, consumed, runs,
                   runClaim, reqs>>

\* request_opened: compare-and-set on the run subject, so refused once the
\* run was abandoned (p learns it at RunEnd).
Ask(p) ==
    /\ pc[p] = "running"
    /\ runs[myRun[p]] = "active"
    /\ reqs[myRun[p]] < MaxOpen
    /\ reqs' = [reqs EXCEPT ![myRun[p]] = @ + 1]
    /\ UNCHANGED <<lease, leaseLive, claimSeq, posted, taken, consumed, runs,
                   runClaim, pc, mySeq, readSeq, seen, myRun>>

\* answer_given, fenced: the next message answers an open request.
Reply(p) ==
    /\ pc[p] = "running"
    /\ reqs[myRun[p]] > 0
    /\ Pending(p)
    /\ Fenced(p)
    /\ Consume(p, seen[p] + 1)
    /\ reqs' = [reqs EXCEPT ![myRun[p]] = @ - 1]
    /\ UNCHANGED <<lease, leaseLive, claimSeq, posted, runs, runClaim, pc,
                   mySeq, readSeq, myRun>>

\* steering_given, fenced: the next message is handed to the running run.
\* The core answers an open request first; allowing either only adds
\* behaviours.
Steer(p) ==
    /\ pc[p] = "running"
    /\ Pending(p)
    /\ Fenced(p)
    /\ Consume(p, seen[p] + 1)
    /\ UNCHANGED <<lease, leaseLive, claimSeq, posted, runs, runClaim, reqs, pc,
                   mySeq, readSeq, myRun>>

\* The fence refuses answer_given or steering_given: nothing is consumed,
\* and p hands over.
ReplyFenced(p) ==
    /\ FENCE
    /\ pc[p] = "running"
    /\ Pending(p)
    /\ ~Newest(p)
    /\ Drop(p)
    /\ UNCHANGED <<lease, leaseLive, claimSeq, posted, taken, consumed, runs,
                   runClaim, reqs>>

\* run_completed or run_failed: compare-and-set on the run subject, not
\* fenced.  Refused once the run was abandoned; then p learns it lost the
\* thread and lets go.  Otherwise p holds the thread and may start another.
RunEnd(p) ==
    /\ pc[p] = "running"
    /\ IF runs[myRun[p]] = "active"
         THEN /\ runs' = [runs EXCEPT ![myRun[p]] = "ended"]
              /\ myRun' = [myRun EXCEPT ![p] = 0]
              /\ pc' = [pc EXCEPT ![p] = "holding"]
              /\ UNCHANGED <<mySeq, readSeq, seen>>
         ELSE /\ UNCHANGED runs
              /\ Drop(p)
    /\ UNCHANGED <<lease, leaseLive, claimSeq, posted, taken, consumed, runClaim, reqs>>

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

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------

TypeOK ==
    /\ lease \in Procs \cup {NoProc}
    /\ leaseLive \in BOOLEAN
    /\ claimSeq \in 0..(MaxClaims + 1)
    /\ posted \in 0..NumMsgs
    /\ taken \in 0..posted
    /\ consumed \in [Msgs -> 0..MaxClaims]
    /\ runs \in [RunIds -> RunStates]
    /\ runClaim \in [RunIds -> 0..MaxClaims]
    /\ reqs \in [RunIds -> 0..MaxOpen]
    /\ pc \in [Procs -> PCs]
    /\ mySeq \in [Procs -> 0..MaxClaims]
    /\ readSeq \in [Procs -> 0..(MaxClaims + 1)]
    /\ seen \in [Procs -> 0..NumMsgs]
    /\ myRun \in [Procs -> 0..NumMsgs]

\* I1: each message is consumed at most once, as a prompt, an answer or
\* steering.
I1_ConsumedAtMostOnce == \A m \in Msgs : consumed[m] <= 1

\* I3: at most one run is active in the thread.
I3_OneActiveRun == Cardinality(ActiveRuns) <= 1

-----------------------------------------------------------------------------
\* Action properties: the audit's rules on real logs (projections/audit),
\* each stated over the steps that write the events it checks.

\* Every fenced write is made under the newest claim marker.
FenceNewestClaim ==
    [][\A p \in Procs :
         (Abandon(p) \/ RunStart(p) \/ Reply(p) \/ Steer(p)) => Newest(p)]_vars

\* thread_claimed lands on the claim sequence its writer read, and
\* thread_released on the releaser's own marker.
ClaimChain ==
    [][\A p \in Procs :
         /\ (Claim(p) /\ claimSeq' # claimSeq) => readSeq[p] = claimSeq
         /\ (Release(p) /\ claimSeq' # claimSeq) => Newest(p)]_vars

\* No run ends after it was abandoned, nor takes a request or an answer.
NoEndAfterAbandon ==
    [][\A r \in RunIds :
         runs[r] = "abandoned" => runs'[r] = "abandoned" /\ reqs'[r] = reqs[r]]_vars

\* Only runs of claims older than the newest are abandoned.
AbandonOnlyOlder ==
    [][\A r \in RunIds :
         (runs[r] # "abandoned" /\ runs'[r] = "abandoned") => runClaim[r] < claimSeq]_vars

\* No request is answered twice: every answer answers an open request.
AnswerOnce ==
    [][\A p \in Procs : Reply(p) => reqs[myRun[p]] > 0]_vars

=============================================================================
