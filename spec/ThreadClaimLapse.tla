-------------------------- MODULE ThreadClaimLapse --------------------------
(***************************************************************************)
(* A thread's claim, with leases that lapse while their holders live.     *)
(*                                                                         *)
(* ADR-0069: a stalled write or a skewed clock lets a lease lapse under a  *)
(* live holder.  Without a fence, the next claimant plans the same message *)
(* and both runs start (I1 and I3 broken).  With FENCE, the writes that    *)
(* consume (run_started, answer_given) and run_abandoned are made only     *)
(* while the writer's claim marker is the newest on threads.T.claim: the   *)
(* marker's sequence is the fencing token, and no clock is involved.       *)
(*                                                                         *)
(* The Go transcription in threadclaimlapse.go uses the same variable,    *)
(* action and invariant names; drift_test.go holds them together.         *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC

CONSTANTS
    Procs,      \* the claimants (runners)
    NumMsgs,    \* messages 1..NumMsgs are posted; consumed oldest first
    MaxClaims,  \* Claim writes markers up to this sequence: keeps the model finite
    FENCE,      \* TRUE: consuming writes need the newest claim marker (ADR-0069)
    NoProc      \* a model value: the lease's holder when it has none

ASSUME /\ Procs # {}
       /\ NoProc \notin Procs
       /\ NumMsgs \in Nat \ {0}
       /\ MaxClaims \in Nat \ {0}
       /\ FENCE \in BOOLEAN

Msgs == 1..NumMsgs

\* A run is named by the claim sequence it started under: one run per claim.
RunIds == 1..MaxClaims

PCs == {"idle", "abandon", "planned", "running", "replied", "holding"}

RunStates == {"none", "active", "ended", "abandoned"}

VARIABLES
    lease,      \* the KV lease's holder, or NoProc
    leaseLive,  \* FALSE once the lease lapsed: TTL expiry or a skewed clock
    claimSeq,   \* sequence of the last event on threads.T.claim (0: none)
    taken,      \* the taken cursor: the newest message consumed
    consumed,   \* consumed[m]: how many writes consumed message m
    runs,       \* runs[r]: the state of the run started under claim r
    pc,         \* pc[p]: where claimant p is in its turn
    mySeq,      \* mySeq[p]: the marker p wrote, its fencing token (0: none)
    seen        \* seen[p]: taken as p read it when it claimed, moved by its writes

vars == <<lease, leaseLive, claimSeq, taken, consumed, runs, pc, mySeq, seen>>

-----------------------------------------------------------------------------

ActiveRuns == {r \in RunIds : runs[r] = "active"}

\* The write's fence: the newest claim marker in storage is the writer's own.
Newest(p) == claimSeq = mySeq[p]

\* Without FENCE a consuming write checks nothing (the bug ADR-0069 fixes).
Fenced(p) == FENCE => Newest(p)

\* A claimant's plan, made on what it read: start a run for the oldest
\* untaken message, or hold the thread with nothing to do.
Plan(t) == IF t < NumMsgs THEN "planned" ELSE "holding"

\* I4: a claimant whose write was refused hands the thread over.
Drop(p) ==
    /\ pc' = [pc EXCEPT ![p] = "idle"]
    /\ mySeq' = [mySeq EXCEPT ![p] = 0]
    /\ seen' = [seen EXCEPT ![p] = 0]

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
    /\ taken = 0
    /\ consumed = [m \in Msgs |-> 0]
    /\ runs = [r \in RunIds |-> "none"]
    /\ pc = [p \in Procs |-> "idle"]
    /\ mySeq = [p \in Procs |-> 0]
    /\ seen = [p \in Procs |-> 0]

\* Acquire the lease when free or lapsed, append thread_claimed (compare-
\* and-set on the claim subject), replay, and plan.  The plan is local: the
\* run_started that carries it out is a later step (RunStart).
Claim(p) ==
    /\ pc[p] = "idle"
    /\ lease = NoProc \/ ~leaseLive
    /\ claimSeq < MaxClaims
    /\ lease' = p
    /\ leaseLive' = TRUE
    /\ claimSeq' = claimSeq + 1
    /\ mySeq' = [mySeq EXCEPT ![p] = claimSeq + 1]
    /\ seen' = [seen EXCEPT ![p] = taken]
    /\ pc' = [pc EXCEPT ![p] = IF ActiveRuns # {} THEN "abandon"
                                                ELSE Plan(taken)]
    /\ UNCHANGED <<taken, consumed, runs>>

\* The lease lapses while its holder lives: a write in flight past the TTL,
\* or a clock that runs ahead of the holder's.  The holder is not told.
Lapse ==
    /\ lease # NoProc
    /\ leaseLive
    /\ leaseLive' = FALSE
    /\ UNCHANGED <<lease, claimSeq, taken, consumed, runs, pc, mySeq, seen>>

\* Compare-and-set on the lease's revision.  It succeeds while no one else
\* took the lease, even a lapsed one: safety must not rest on the TTL.
Renew(p) ==
    /\ mySeq[p] # 0
    /\ lease = p
    /\ leaseLive' = TRUE
    /\ UNCHANGED <<lease, claimSeq, taken, consumed, runs, pc, mySeq, seen>>

\* A holder with nothing to do appends thread_released, compare-and-set on
\* its own marker, and frees the lease.  If a newer marker exists the
\* release is refused and writes nothing; either way p lets go.
Release(p) ==
    /\ pc[p] = "holding"
    /\ IF Newest(p)
         THEN /\ claimSeq' = claimSeq + 1
              /\ lease' = NoProc
              /\ leaseLive' = FALSE
         ELSE UNCHANGED <<claimSeq, lease, leaseLive>>
    /\ Drop(p)
    /\ UNCHANGED <<taken, consumed, runs>>

\* The new claimant abandons the run that started under an older claim
\* (run_abandoned, fenced), then plans on what it read when it claimed.
Abandon(p) ==
    /\ pc[p] = "abandon"
    /\ Fenced(p)
    /\ runs' = [r \in RunIds |-> IF runs[r] = "active" THEN "abandoned"
                                                    ELSE runs[r]]
    /\ pc' = [pc EXCEPT ![p] = Plan(seen[p])]
    /\ UNCHANGED <<lease, leaseLive, claimSeq, taken, consumed, mySeq, seen>>

\* run_started: consumes the planned message, the oldest untaken one as p
\* read it, and opens p's run with its one request.
RunStart(p) ==
    /\ pc[p] = "planned"
    /\ Fenced(p)
    /\ Consume(p, seen[p] + 1)
    /\ runs' = [runs EXCEPT ![mySeq[p]] = "active"]
    /\ pc' = [pc EXCEPT ![p] = "running"]
    /\ UNCHANGED <<lease, leaseLive, claimSeq, mySeq>>

\* The fence refuses run_abandoned or run_started: nothing is written, the
\* start consumes nothing, and p hands over (I4).
StartFenced(p) ==
    /\ FENCE
    /\ pc[p] \in {"abandon", "planned"}
    /\ ~Newest(p)
    /\ Drop(p)
    /\ UNCHANGED <<lease, leaseLive, claimSeq, taken, consumed, runs>>

\* answer_given: the next untaken message answers the run's open request.
Reply(p) ==
    /\ pc[p] = "running"
    /\ seen[p] < NumMsgs
    /\ Fenced(p)
    /\ Consume(p, seen[p] + 1)
    /\ pc' = [pc EXCEPT ![p] = "replied"]
    /\ UNCHANGED <<lease, leaseLive, claimSeq, runs, mySeq>>

\* The fence refuses the answer: nothing is consumed, p's round ends.
ReplyFenced(p) ==
    /\ FENCE
    /\ pc[p] = "running"
    /\ seen[p] < NumMsgs
    /\ ~Newest(p)
    /\ Drop(p)
    /\ UNCHANGED <<lease, leaseLive, claimSeq, taken, consumed, runs>>

\* run_completed or run_failed: compare-and-set on the run subject, not
\* fenced.  Refused once the run was abandoned; then p learns it lost the
\* thread and lets go.
RunEnd(p) ==
    /\ pc[p] \in {"running", "replied"}
    /\ IF runs[mySeq[p]] = "active"
         THEN /\ runs' = [runs EXCEPT ![mySeq[p]] = "ended"]
              /\ pc' = [pc EXCEPT ![p] = "holding"]
              /\ UNCHANGED <<mySeq, seen>>
         ELSE /\ UNCHANGED runs
              /\ Drop(p)
    /\ UNCHANGED <<lease, leaseLive, claimSeq, taken, consumed>>

Next ==
    \/ \E p \in Procs : Claim(p)
    \/ Lapse
    \/ \E p \in Procs : Renew(p)
    \/ \E p \in Procs : Release(p)
    \/ \E p \in Procs : Abandon(p)
    \/ \E p \in Procs : RunStart(p)
    \/ \E p \in Procs : StartFenced(p)
    \/ \E p \in Procs : Reply(p)
    \/ \E p \in Procs : ReplyFenced(p)
    \/ \E p \in Procs : RunEnd(p)

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------

TypeOK ==
    /\ lease \in Procs \cup {NoProc}
    /\ leaseLive \in BOOLEAN
    /\ claimSeq \in 0..(MaxClaims + 1)
    /\ taken \in 0..NumMsgs
    /\ consumed \in [Msgs -> 0..(2 * MaxClaims)]
    /\ runs \in [RunIds -> RunStates]
    /\ pc \in [Procs -> PCs]
    /\ mySeq \in [Procs -> 0..MaxClaims]
    /\ seen \in [Procs -> 0..NumMsgs]

\* I1: each message is consumed at most once, as a prompt or as an answer.
I1_ConsumedAtMostOnce == \A m \in Msgs : consumed[m] <= 1

\* I3: at most one run is active in the thread.
I3_OneActiveRun == Cardinality(ActiveRuns) <= 1

=============================================================================
