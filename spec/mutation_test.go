package spec

import (
	"slices"
	"testing"
)

// mutants is the mutation table of README.md: each guard of each action
// removed in turn, and the invariants and properties that must then fail
// somewhere in the state space of ThreadClaimLapse.cfg. A guard whose
// removal breaks nothing says why in because.
var mutants = []struct {
	name  string
	cut   mutation
	fails []string
	// starves lists the liveness checks (EventuallyConsumed under each
	// fairness) that must fail. They are run only for mutants no safety
	// check catches: a safety failure already says the guard matters.
	starves []LiveFairness
	because string // why nothing fails, when fails and starves are empty
}{
	{"RunStart: no fence", mutFenceRunStart, []string{"I1_ConsumedAtMostOnce", "I3_OneActiveRun", "NoneSkipped", "FenceNewestClaim"}, nil, ""},
	{"Reply: no fence", mutFenceReply, []string{"I1_ConsumedAtMostOnce", "NoneSkipped", "FenceNewestClaim", "NoEndAfterAbandon"}, nil, ""},
	{"Steer: no fence", mutFenceSteer, []string{"I1_ConsumedAtMostOnce", "NoneSkipped", "FenceNewestClaim"}, nil, ""},
	{"Abandon: no fence", mutFenceAbandon, []string{"FenceNewestClaim", "NoEndAfterAbandon", "AbandonOnlyOlder"}, nil, ""},
	// TypeOK fails too: releases no longer one per marker push claimSeq
	// past MaxClaims + 1.
	{"Release: no check of its own marker", mutReleaseOwn, []string{"TypeOK", "ClaimChain"}, nil, ""},
	{"Load: no replay (Claim's replay)", mutReplay, []string{"I1_ConsumedAtMostOnce", "I3_OneActiveRun", "NoneSkipped"}, nil, ""},
	{"Load: no abandon planned", mutLoadAbandon, []string{"I3_OneActiveRun"}, nil, ""},
	// Markers are totally ordered by the stream whatever the claimant read,
	// so the fence still holds; only the audit's claim chain sees it.
	{"Claim: no compare-and-set on what ReadClaim read", mutClaimCAS, []string{"ClaimChain"}, nil, ""},
	{"Claim: retries without the lease", mutRetryLease, nil, nil,
		"a claimant that lost the lease and still appends its marker holds the newest marker, so the fence " +
			"is its; the lease holder's writes are refused until it claims again (ADR-0069: the marker decides safety), " +
			"and the one that retries makes progress"},
	// Two runners take the thread from each other forever, each refusing
	// the other's writes: no lapse needed.
	{"Acquire: takes a live lease", mutLeaseLive, nil, []LiveFairness{RunnersFair}, ""},
	{"Renew: renews another's lease", mutRenewOther, nil, nil,
		"a live lease only delays Acquire, and a lease is never what lets a write land; the renewal of a " +
			"lease that is live already changes nothing"},
	{"Ask: no compare-and-set on the run subject", mutAskCAS, []string{"NoEndAfterAbandon"}, nil, ""},
	{"Reply: no open request needed", mutAnswerOpen, []string{"AnswerOnce"}, nil, ""},
	{"RunEnd: no compare-and-set on the run subject", mutEndCAS, []string{"NoEndAfterAbandon"}, nil, ""},
	// TypeOK's taken \in 0..posted: a message consumed before it was posted.
	{"RunStart: no posted message needed", mutPosted, []string{"TypeOK"}, nil, ""},
	// A refusal writes nothing and hands over (I4): refusing more often
	// never breaks safety, but refusing the newest refuses everyone.
	{"StartFenced, ReplyFenced: refuse the newest too", mutRefuseNewest, nil, []LiveFairness{RunnersFair, HolderStalls}, ""},
	{"PostIdle: no check that no run is active", mutRejectIdle, []string{"RejectOnlyIdle"}, nil, ""},
	{"RunStart: takes the newest pending message", mutOldest, []string{"NoneSkipped"}, nil, ""},
	{"Reply: does not close the request it answers", mutReplyClose, []string{"AnswerOnce"}, nil, ""},
	// The stalled holder's renewals revive its session each time it
	// lapses, so the others' Acquire is never enabled for good.
	{"Renew: revives a lapsed session", mutRevive, nil, []LiveFairness{HolderStalls}, ""},
	// Not a liveness bug (TestMutation_keepHolding_onlyDelays): a delay.
	{"RunEnd: refused, holds on", mutKeepHolding, nil, nil,
		"not a liveness bug: a stale holder has seen no more than taken, so with a message pending its " +
			"StartFenced is enabled, and weakly fair: it hands over; holding on without a message pending " +
			"blocks no one else's Acquire, whose guard reads the lease alone"},
}

func TestMutation_eachGuardMatters(t *testing.T) {
	for _, mu := range mutants {
		t.Run(mu.name, func(t *testing.T) {
			t.Parallel() // CPU-bound: two cores check two mutants
			c := DefaultConfig()
			c.removed = mu.cut
			m, err := ThreadClaimLapse(c)
			if err != nil {
				t.Fatal(err)
			}
			res := CheckAll(m)
			var got []string
			for _, name := range append(m.InvariantNames(), m.PropertyNames()...) {
				if _, ok := res.Failures[name]; ok {
					got = append(got, name)
				}
			}
			t.Logf("%d distinct states; fails: %v", res.Distinct, got)
			for _, name := range got {
				t.Logf("%s: %v", name, actions(t, res.Failures[name]))
			}
			if !slices.Equal(got, mu.fails) {
				t.Errorf("fails %v, want %v", got, mu.fails)
			}
			if len(mu.fails) > 0 {
				return
			}
			var starves []LiveFairness
			for _, f := range []LiveFairness{RunnersFair, HolderStalls} {
				lr, err := EventuallyConsumed(c, f)
				if err != nil {
					t.Fatal(err)
				}
				if lr.Violated {
					starves = append(starves, f)
					t.Logf("%v starves: %v, then forever %v", f, actions(t, lr.Prefix), lr.Cycle)
				}
			}
			if !slices.Equal(starves, mu.starves) {
				t.Errorf("starves under %v, want %v", starves, mu.starves)
			}
			if len(starves) == 0 && mu.because == "" {
				t.Errorf("nothing fails and no reason is given")
			}
		})
	}
}

// Every guard that can be removed is in the table, once.
func TestMutation_tableCoversEveryGuard(t *testing.T) {
	var all mutation
	for _, mu := range mutants {
		if mu.cut == 0 || mu.cut&(mu.cut-1) != 0 || all&mu.cut != 0 {
			t.Errorf("%s: cut %b is not one guard of its own", mu.name, mu.cut)
		}
		all |= mu.cut
	}
	if want := mutLast<<1 - 1; all != want {
		t.Errorf("guards in the table %b, want every guard %b", all, want)
	}
}

// Vacuity: each invariant and property fails in some mutant, alone, so a
// TRUE in its place would be caught (the mutant's row above would change).
func TestVacuity_everyCheckCanFail(t *testing.T) {
	names := append(model(t, true).InvariantNames(), model(t, true).PropertyNames()...)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			for _, mu := range mutants {
				if !slices.Contains(mu.fails, name) {
					continue
				}
				c := DefaultConfig()
				c.removed = mu.cut
				m, err := ThreadClaimLapse(c)
				if err != nil {
					t.Fatal(err)
				}
				m = m.WithInvariants(name)
				res := Check(m)
				if res.Violated != name {
					t.Fatalf("mutant %q: Violated = %q, want %s", mu.name, res.Violated, name)
				}
				t.Logf("mutant %q breaks it in %d steps: %v", mu.name, len(res.Trace)-1, actions(t, res.Trace))
				return
			}
			t.Errorf("no mutant breaks %s: it may hold vacuously", name)
		})
	}
}

// Issue 27: the "holds on" mutant (RunEnd refused, and the holder holds on
// as if its run had ended) is a delay, not a liveness bug. The argument,
// checked here on its liveness model (claims renumbered, so takeovers are
// unbounded):
//
//  1. A stale holder (holding, its marker not the newest) has seen no more
//     than taken: seen[p] <= taken in every reachable state. So in every
//     state with a message pending (taken < posted) it has Pending(p), the
//     fence refuses it, and StartFenced(p) is enabled: weak fairness makes
//     it hand over. A stale holder stays only while nothing is pending.
//  2. It blocks no one else: Acquire's guard reads the lease alone, and a
//     stale holder's lease, if it is still its own, is one it acquires
//     again after StartFenced (Acquire takes its own session's lease).
//
// The state it needs is reachable (a stale holder with a message pending),
// so the lemma is not vacuous; EventuallyConsumed holds on the mutant
// under both fairness assumptions (TestMutation_eachGuardMatters).
func TestMutation_keepHolding_onlyDelays(t *testing.T) {
	c := DefaultConfig()
	c.removed = mutKeepHolding
	m, err := liveModel(c)
	if err != nil {
		t.Fatal(err)
	}
	tm := tcl{c}
	reached := false
	m.Invariants = []Invariant[ThreadState]{{Name: "StaleHolderSeesPending", Holds: func(s ThreadState) bool {
		for p := range c.Procs {
			if s.pc[p] != holding || tm.newest(s, p) {
				continue
			}
			if s.seen[p] > s.taken {
				return false
			}
			if s.taken < s.posted {
				reached = true
				if _, ok := tm.StartFenced(s, p); !ok {
					return false
				}
			}
		}
		return true
	}}}
	m.Properties = nil
	res := CheckAll(m)
	t.Logf("%d distinct states of the mutant's liveness model", res.Distinct)
	if tr, ok := res.Failures["StaleHolderSeesPending"]; ok {
		t.Fatalf("a stale holder cannot hand over with a message pending:\n%s", m.FormatTrace(tr))
	}
	if !reached {
		t.Fatal("no state has a stale holder with a message pending: the lemma is vacuous")
	}
	for _, f := range []LiveFairness{RunnersFair, HolderStalls} {
		lr, err := EventuallyConsumed(c, f)
		if err != nil {
			t.Fatal(err)
		}
		if lr.Violated {
			t.Errorf("%v: the mutant starves: %v, then forever %v", f, actions(t, lr.Prefix), lr.Cycle)
		}
	}
}
