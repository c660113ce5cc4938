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
	name    string
	cut     mutation
	fails   []string
	because string // why nothing fails, when fails is empty
}{
	{"RunStart: no fence", mutFenceRunStart, []string{"I1_ConsumedAtMostOnce", "I3_OneActiveRun", "FenceNewestClaim"}, ""},
	{"Reply: no fence", mutFenceReply, []string{"I1_ConsumedAtMostOnce", "FenceNewestClaim", "NoEndAfterAbandon"}, ""},
	{"Steer: no fence", mutFenceSteer, []string{"I1_ConsumedAtMostOnce", "FenceNewestClaim"}, ""},
	{"Abandon: no fence", mutFenceAbandon, []string{"FenceNewestClaim", "NoEndAfterAbandon", "AbandonOnlyOlder"}, ""},
	// TypeOK fails too: releases no longer one per marker push claimSeq
	// past MaxClaims + 1.
	{"Release: no check of its own marker", mutReleaseOwn, []string{"TypeOK", "ClaimChain"}, ""},
	{"Load: no replay (Claim's replay)", mutReplay, []string{"I1_ConsumedAtMostOnce", "I3_OneActiveRun"}, ""},
	{"Load: no abandon planned", mutLoadAbandon, []string{"I3_OneActiveRun"}, ""},
	// Markers are totally ordered by the stream whatever the claimant read,
	// so the fence still holds; only the audit's claim chain sees it.
	{"Claim: no compare-and-set on what ReadClaim read", mutClaimCAS, []string{"ClaimChain"}, ""},
	{"Claim: retries without the lease", mutRetryLease, nil,
		"liveness only: a claimant that lost the lease and still appends its marker holds the newest marker, so the fence " +
			"is its; the lease holder's writes are refused until it claims again (ADR-0069: the marker decides safety)"},
	{"Acquire: takes a live lease", mutLeaseLive, nil,
		"Lapse may fire in any state with a live lease, so taking a live lease reaches the states of Lapse then Acquire: " +
			"the same 19008 states. Safety never rests on the lease (DESIGN 3), which is what Lapse says"},
	{"Renew: renews another's lease", mutRenewOther, nil,
		"liveness only: a live lease only delays Acquire, and a lease is never what lets a write land"},
	{"Ask: no compare-and-set on the run subject", mutAskCAS, []string{"NoEndAfterAbandon"}, ""},
	{"Reply: no open request needed", mutAnswerOpen, []string{"AnswerOnce"}, ""},
	{"RunEnd: no compare-and-set on the run subject", mutEndCAS, []string{"NoEndAfterAbandon"}, ""},
	// TypeOK's taken \in 0..posted: a message consumed before it was posted.
	{"RunStart: no posted message needed", mutPosted, []string{"TypeOK"}, ""},
	{"StartFenced, ReplyFenced: refuse the newest too", mutRefuseNewest, nil,
		"liveness only: a refusal writes nothing and hands the thread over (I4); refusing more often loses progress, never safety"},
}

func TestMutation_eachGuardMatters(t *testing.T) {
	for _, mu := range mutants {
		t.Run(mu.name, func(t *testing.T) {
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
			if len(got) == 0 && mu.because == "" {
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
	if want := mutRefuseNewest<<1 - 1; all != want {
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
