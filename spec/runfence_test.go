package spec

import (
	"flag"
	"slices"
	"testing"
)

var flagForger = flag.Bool("spec.forger", false, "spec: also check liveness with a forger, and blind outputs with a forger (about 10 s of CPU with -race)")

// The forger and the fence on the run subject (README.md, "Claims on the
// run subject"): the window of the claim-subject fence, the guard that
// closes it, and RUNFENCE, the claims on the run subject with every holder
// write a compare-and-set on it.

// The recorded sizes of the forger and run-fence configs: the drift check
// of meaning, as in threadclaimlapse_test.go.
const (
	// ThreadClaimLapse_guard.cfg (GuardConfig), every state explored.
	guardDistinct    = 170618
	guardTransitions = 640691
	// ThreadClaimLapse_runfence.cfg (RunFenceConfig).
	runFenceDistinct    = 28456
	runFenceTransitions = 85644
	// ThreadClaimLapse_runfence_forger.cfg (RunFenceForgerConfig).
	runFenceForgerDistinct    = 179949
	runFenceForgerTransitions = 655838
	// The liveness model of ThreadClaimLapse_runfence.cfg.
	runFenceLiveDistinct    = 22324
	runFenceLiveTransitions = 80408
)

// windowSteps is the window: p1 claims and loads the thread, the forger
// stores run_started of the pending message under p1's claim, and p1's own
// run_started, fenced by the same claim, lands on top of it.
var windowSteps = []string{"Init", "Post",
	"Acquire(p1)", "ReadClaim(p1)", "Claim(p1)", "Load(p1)", "Forge(start)", "RunStart(p1)"}

func checkModel(t *testing.T, c Config) (Model[ThreadState, ThreadState], Result[ThreadState]) {
	t.Helper()
	m, err := ThreadClaimLapse(c)
	if err != nil {
		t.Fatal(err)
	}
	return m, Check(m)
}

// Spec: ThreadClaimLapse_window.cfg. Today's fence alone: the forger's
// write passes the claim fence, and so does the honest holder's, which
// then consumes the message a second time (HonestI1) and starts a second
// run (HonestI3).
func TestRunFence_window_honestWriteBreaksI1andI3(t *testing.T) {
	m, res := checkModel(t, WindowConfig())
	if res.Violated != "HonestI1" {
		t.Fatalf("violated %q, want HonestI1", res.Violated)
	}
	t.Logf("HonestI1 violated after %d distinct states, a trace of %d states (%d steps):\n%s",
		res.Distinct, len(res.Trace), len(res.Trace)-1, m.FormatTrace(res.Trace))
	if got := actions(t, res.Trace); !slices.Equal(got, windowSteps) {
		t.Errorf("trace %v\nwant the window %v", got, windowSteps)
	}
	last := res.Trace[len(res.Trace)-1].State
	if (tcl{WindowConfig()}).HonestI3(last) {
		t.Errorf("HonestI3 holds in the last state; the honest start made two runs active")
	}
}

// Spec: ThreadClaimLapse_mixed.cfg. A rolling upgrade, old and new
// runners on one stream: the old fence does not see a claim on the run
// subject, and an old claim does not move the run subject, so a stale
// writer of either kind lands a consumption. No forger needed.
func TestRunFence_mixed_violatesI1(t *testing.T) {
	m, err := ThreadClaimLapse(MixedConfig())
	if err != nil {
		t.Fatal(err)
	}
	m.Properties = nil // the .cfg declares none: the old writes break FenceNewestClaim first
	res := Check(m)
	if res.Violated != "I1_ConsumedAtMostOnce" {
		t.Fatalf("violated %q, want I1_ConsumedAtMostOnce", res.Violated)
	}
	t.Logf("I1 violated after %d distinct states, %d steps: %v", res.Distinct, len(res.Trace)-1, actions(t, res.Trace))
	// The other way round: a stale new-protocol holder's write lands
	// past an old claim (an old marker does not move the run subject), and
	// the old claimant, which loaded before it, then writes on top of it
	// (its fence sees the claim subject alone): the same damage, written
	// by the old holder again.
	m.Invariants = nil
	m.Properties = []Property[ThreadState]{{Name: "NoStaleNewWrite", Holds: func(s ThreadState, to Step[ThreadState]) bool {
		p := procIndex(to.Arg)
		return !(p == 1 && (to.Action == "RunStart" || to.Action == "Reply" || to.Action == "Steer") &&
			s.oldSeq == s.claimSeq && s.claimSeq != s.mySeq[p])
	}}}
	r := Check(m)
	if r.Violated == "" {
		t.Fatal("no stale new-protocol write lands past an old claim")
	}
	t.Logf("a stale new-protocol write past an old claim, %d steps: %v", len(r.Trace)-1, actions(t, r.Trace))
}

// Spec: ThreadClaimLapse_guard.cfg, ThreadClaimLapse_runfence.cfg and
// ThreadClaimLapse_runfence_forger.cfg: every invariant and property of
// the .cfg holds, with the counts recorded.
func TestRunFence_configsHold(t *testing.T) {
	for _, tc := range []struct {
		name              string
		cfg               Config
		distinct, trans   int
		fires, neverFires []string
	}{
		// Without a forger no holder's write is ever refused for the run
		// subject alone: Reread never fires.
		{"runfence", RunFenceConfig(), runFenceDistinct, runFenceTransitions,
			[]string{"Claim", "Output", "RunStart", "Reply", "Steer", "Abandon", "StartFenced", "ReplyFenced"}, []string{"Reread", "Forge", "CheckLease"}},
		{"runfence_forger", RunFenceForgerConfig(), runFenceForgerDistinct, runFenceForgerTransitions,
			[]string{"Forge", "Reread", "Output", "StartFenced", "ReplyFenced"}, []string{"CheckLease"}},
		{"guard", GuardConfig(), guardDistinct, guardTransitions,
			[]string{"Forge", "Reread", "Output", "StartFenced", "ReplyFenced"}, []string{"CheckLease"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := ThreadClaimLapse(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			// The lemma the fence rests on, checked in the same search (an
			// invariant more changes no count): a holder that knows the run
			// subject's last sequence has seen every consumption, and with
			// RUNFENCE holds the newest marker.
			m.Invariants = append(m.Invariants, Invariant[ThreadState]{Name: "KnowsAll", Holds: func(s ThreadState) bool {
				for p := range tc.cfg.Procs {
					if s.runCur[p] && (s.pc[p] == abandon || s.pc[p] == holding || s.pc[p] == running) &&
						(s.seen[p] != s.taken || tc.cfg.RunFence && s.claimSeq != s.mySeq[p]) {
						return false
					}
				}
				return true
			}})
			res := Check(m)
			t.Logf("%s: %d distinct states, %d transitions, depth %d", tc.name, res.Distinct, res.Transitions, res.Depth)
			if res.Violated != "" {
				t.Fatalf("%s violated:\n%s", res.Violated, m.FormatTrace(res.Trace))
			}
			if res.Distinct != tc.distinct || res.Transitions != tc.trans || res.Depth != fencedDepth {
				t.Errorf("distinct, transitions, depth = %d, %d, %d; recorded %d, %d, %d",
					res.Distinct, res.Transitions, res.Depth, tc.distinct, tc.trans, fencedDepth)
			}
			for _, a := range tc.fires {
				if res.Coverage[a] == 0 {
					t.Errorf("%s never fires", a)
				}
			}
			for _, a := range tc.neverFires {
				if res.Coverage[a] != 0 {
					t.Errorf("%s fires %d times", a, res.Coverage[a])
				}
			}
		})
	}
}

// EventuallyConsumed holds with RUNFENCE under both fairness assumptions;
// with a forger too, once it stops (Forge happens finitely often), by the
// guard or by RUNFENCE. The forger's runs are no slower to recover from
// than a dead holder's: they are abandoned by the holder that rereads, or
// by the next claim.
func TestRunFence_liveness(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		always bool // run without -spec.forger too
	}{
		{"runfence", RunFenceConfig(), true},
		{"runfence_forger", RunFenceForgerConfig(), false},
		{"guard", GuardConfig(), false},
	} {
		for _, f := range []LiveFairness{RunnersFair, HolderStalls} {
			t.Run(tc.name+"/"+f.String(), func(t *testing.T) {
				if !tc.always && !*flagForger {
					t.Skip("run with -spec.forger")
				}
				res, err := EventuallyConsumed(tc.cfg, f)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%d distinct states, %d transitions", res.Distinct, res.Transitions)
				if res.Violated {
					t.Fatalf("starves: %v, then forever %v", actions(t, res.Prefix), res.Cycle)
				}
				if tc.name == "runfence" && (res.Distinct != runFenceLiveDistinct || res.Transitions != runFenceLiveTransitions) {
					t.Errorf("distinct, transitions = %d, %d; recorded %d, %d",
						res.Distinct, res.Transitions, runFenceLiveDistinct, runFenceLiveTransitions)
				}
			})
		}
	}
}

// claimRaced is a claimant whose thread_claimed is refused although no
// claim landed since it read: with RUNFENCE, another write on the run
// subject (the stale holder's) moved it.
func claimRaced(s ThreadState, to Step[ThreadState]) bool {
	if to.Action != "Claim" {
		return true
	}
	p := procIndex(to.Arg)
	return !(s.claimSeq == s.readSeq[p] && to.State.claimSeq == s.claimSeq)
}

// A claimant racing the holder: its compare-and-set on the run subject is
// refused whenever the holder writes first (here the holder whose session
// lapsed), which the claim-subject fence never does. It reads again while
// the lease is its own, and the claim lands once the holder stops writing:
// the liveness model, where runs end (RunEnd is weakly fair) and messages
// are finite, says it does, for every claimant holding a live lease.
func TestRunFence_claimRacesTheHolder(t *testing.T) {
	for _, c := range []Config{DefaultConfig(), RunFenceConfig()} {
		m, err := ThreadClaimLapse(c)
		if err != nil {
			t.Fatal(err)
		}
		m.Invariants = nil
		m.Properties = []Property[ThreadState]{{Name: "ClaimNotRaced", Holds: claimRaced}}
		res := Check(m)
		if !c.RunFence {
			if res.Violated != "" {
				t.Errorf("claim-subject fence: a claim refused with no newer claim:\n%s", m.FormatTrace(res.Trace))
			}
			continue
		}
		if res.Violated == "" {
			t.Fatal("RUNFENCE: no claim is ever refused by a holder's write")
		}
		t.Logf("RUNFENCE: a claim refused by the holder's write, %d states: %v", len(res.Trace), actions(t, res.Trace))
	}

	// Every claimant that holds a live lease lands its marker or loses the
	// lease: no fair cycle keeps it reading and refused.
	live, err := liveModel(RunFenceConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []LiveFairness{RunnersFair, HolderStalls} {
		l := Liveness[ThreadState]{
			Fair:   func(action, _ string) bool { return liveFair[action] },
			Finite: func(action, _ string) bool { return action == "Lapse" || action == "Release" || action == "Forge" },
			Bad: func(s ThreadState) bool {
				for p := range 2 {
					if s.lease == int8(p) && s.leaseLive && (s.pc[p] == leased || s.pc[p] == marking) {
						return true
					}
				}
				return false
			},
		}
		if f == HolderStalls {
			stalled := procName(0)
			l.Fair = func(action, arg string) bool { return action == "Lapse" || liveFair[action] && arg != stalled }
			l.Finite = func(action, arg string) bool {
				return action == "Release" || action == "Forge" || stalledSteps[action] && arg == stalled
			}
		}
		res := CheckLiveness(live, l)
		if res.Violated {
			t.Errorf("%v: a claimant with a live lease never lands its marker: %v, then forever %v", f, actions(t, res.Prefix), res.Cycle)
		}
	}
}

// runFenceMutants remove a guard of the fence on the run subject. first is
// the first check the checker finds false (breadth first, properties and
// invariants), damage the first invariant with the properties left out
// ("" when no invariant breaks: the checker then explores to the end).
var runFenceMutants = []struct {
	name   string
	cut    mutation
	forger bool
	first  string
	damage string
}{
	// The consuming writes: without the compare-and-set on the run
	// subject a stale holder's write lands.
	{"RunStart: no compare-and-set", mutFenceRunStart, false, "FenceNewestClaim", "I1_ConsumedAtMostOnce"},
	{"Reply: no compare-and-set", mutFenceReply, false, "FenceNewestClaim", "I1_ConsumedAtMostOnce"},
	{"Steer: no compare-and-set", mutFenceSteer, false, "FenceNewestClaim", "I1_ConsumedAtMostOnce"},
	{"Abandon: no compare-and-set", mutFenceAbandon, false, "FenceNewestClaim", "I1_ConsumedAtMostOnce"},
	// With a forger, the one consuming write without it is the window.
	{"RunStart: no compare-and-set, forger", mutFenceRunStart, true, "HonestI1", "HonestI1"},
	{"Steer: no compare-and-set, forger", mutFenceSteer, true, "HonestI1", "HonestI1"},
	// The writes that consume nothing: unchecked, their ack tells the
	// holder a last sequence it cannot trust, and its next consuming
	// write lands on a newer claim.
	{"Ask: no compare-and-set", mutAskCAS, false, "FenceNewestClaim", "I1_ConsumedAtMostOnce"},
	{"Output: no compare-and-set", mutOutputCAS, false, "FenceNewestClaim", "I1_ConsumedAtMostOnce"},
	{"RunEnd: no compare-and-set", mutEndCAS, false, "ClaimChain", "TypeOK"},
	// The reads: a load or a reread that finds a newer marker than its
	// own must stop (I4), not take the run subject's last sequence.
	{"Load: takes the last sequence past a newer marker", mutLoadNewest, false, "ClaimChain", "TypeOK"},
	{"Reread: goes on past a newer marker", mutRereadNewest, true, "ClaimChain", "TypeOK"},
	// The claims: only the audit's chain sees them.
	{"Claim: no compare-and-set on the run subject", mutClaimCAS, false, "ClaimChain", ""},
	{"Release: no compare-and-set on the run subject", mutReleaseOwn, false, "ClaimChain", "TypeOK"},
}

// Each guard of RUNFENCE matters: removed, the checker finds a violation.
func TestRunFence_mutation_eachGuardMatters(t *testing.T) {
	for _, mu := range runFenceMutants {
		t.Run(mu.name, func(t *testing.T) {
			c := RunFenceConfig()
			c.Forger = mu.forger
			c.removed = mu.cut
			m, res := checkModel(t, c)
			if res.Violated != mu.first {
				t.Errorf("first violation %q, want %q", res.Violated, mu.first)
			}
			if res.Violated != "" {
				t.Logf("%s after %d distinct states, %d steps: %v", res.Violated, res.Distinct, len(res.Trace)-1, actions(t, res.Trace))
			}
			m.Properties = nil
			inv := Check(m)
			if inv.Violated != mu.damage {
				t.Errorf("first invariant violated %q, want %q", inv.Violated, mu.damage)
			}
			if inv.Violated != "" {
				t.Logf("%s after %d distinct states, %d steps: %v", inv.Violated, inv.Distinct, len(inv.Trace)-1, actions(t, inv.Trace))
			}
		})
	}
}

// run_output could go unchecked, pipelined, if the holder never takes its
// ack for the run subject's last sequence: it then rereads before its next
// checked write (Reread), which folds whatever landed. Safe, with a forger
// too, and live; the cost is a read before every checked write that
// follows outputs.
func TestRunFence_mutation_blindOutputIsSafe(t *testing.T) {
	for _, forger := range []bool{false, true} {
		c := RunFenceConfig()
		c.Forger = forger
		c.removed = mutOutputBlind
		m, err := ThreadClaimLapse(c)
		if err != nil {
			t.Fatal(err)
		}
		if forger && !*flagForger {
			t.Log("with a forger: run with -spec.forger")
			continue
		}
		res := Check(m)
		t.Logf("forger %v: %d distinct states", forger, res.Distinct)
		if res.Violated != "" {
			t.Errorf("%s violated:\n%s", res.Violated, m.FormatTrace(res.Trace))
		}
		if forger {
			continue
		}
		for _, f := range []LiveFairness{RunnersFair, HolderStalls} {
			lr, err := EventuallyConsumed(c, f)
			if err != nil {
				t.Fatal(err)
			}
			if lr.Violated {
				t.Errorf("%v starves: %v, then forever %v", f, actions(t, lr.Prefix), lr.Cycle)
			}
		}
	}
}

// Refusing the newest refuses everyone, with RUNFENCE as without.
func TestRunFence_mutation_refuseNewestStarves(t *testing.T) {
	c := RunFenceConfig()
	c.removed = mutRefuseNewest
	for _, f := range []LiveFairness{RunnersFair, HolderStalls} {
		lr, err := EventuallyConsumed(c, f)
		if err != nil {
			t.Fatal(err)
		}
		if !lr.Violated {
			t.Errorf("%v: EventuallyConsumed holds", f)
		}
	}
}
