package spec

import (
	"slices"
	"testing"
)

// fencedDistinct is the number of distinct states of ThreadClaimLapse.cfg's
// model (DefaultConfig), as measured. When the model changes, update it
// and say in the commit message why the count moved: an unexplained change
// means the transcription drifted.
const fencedDistinct = 509

// nofenceDistinct is the number of reachable states without the fence,
// explored to the end (no invariant checked). Update it as fencedDistinct.
const nofenceDistinct = 1222

// adrSteps is ADR-0069's interleaving: A claims and plans, A's lease
// lapses, B claims and plans the same message, both runs start.
var adrSteps = []string{"Init", "Claim(p1)", "Lapse", "Claim(p2)", "RunStart(p1)", "RunStart(p2)"}

func model(t *testing.T, fence bool) Model[ThreadState, ThreadState] {
	t.Helper()
	c := DefaultConfig()
	c.Fence = fence
	m, err := ThreadClaimLapse(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Spec: ThreadClaimLapse.cfg
func TestThreadClaimLapse_fence_invariantsHold(t *testing.T) {
	m := model(t, true)
	res := Check(m)
	t.Logf("FENCE = TRUE: %d distinct states, depth %d", res.Distinct, res.Depth)
	if res.Violated != "" {
		t.Fatalf("%s violated:\n%s", res.Violated, m.FormatTrace(res.Trace))
	}
	if res.Distinct != fencedDistinct {
		t.Errorf("distinct states = %d, recorded %d", res.Distinct, fencedDistinct)
	}
}

// Spec: ThreadClaimLapse_nofence.cfg, ADR-0069 steps 1-4.
func TestThreadClaimLapse_nofence_violatesI3(t *testing.T) {
	m := model(t, false).WithInvariants("I3_OneActiveRun")
	res := Check(m)
	if res.Violated != "I3_OneActiveRun" {
		t.Fatalf("Violated = %q, want I3_OneActiveRun", res.Violated)
	}
	t.Logf("I3_OneActiveRun violated after %d distinct states:\n%s", res.Distinct, m.FormatTrace(res.Trace))
	if got := actions(t, res.Trace); !slices.Equal(got, adrSteps) {
		t.Errorf("counterexample = %v, want ADR-0069's %v", got, adrSteps)
	}
}

// Spec: ThreadClaimLapse_nofence.cfg; the same steps take one prompt twice.
func TestThreadClaimLapse_nofence_violatesI1(t *testing.T) {
	m := model(t, false).WithInvariants("I1_ConsumedAtMostOnce")
	res := Check(m)
	if res.Violated != "I1_ConsumedAtMostOnce" {
		t.Fatalf("Violated = %q, want I1_ConsumedAtMostOnce", res.Violated)
	}
	t.Logf("I1_ConsumedAtMostOnce violated after %d distinct states:\n%s", res.Distinct, m.FormatTrace(res.Trace))
	if got := actions(t, res.Trace); !slices.Equal(got, adrSteps) {
		t.Errorf("counterexample = %v, want %v", got, adrSteps)
	}
}

// With every invariant of the .cfg, as TLC runs it, the first one broken
// in .cfg order is reported, and the state breaks both.
func TestThreadClaimLapse_nofence_cfgInvariants(t *testing.T) {
	m := model(t, false)
	res := Check(m)
	if res.Violated != "I1_ConsumedAtMostOnce" {
		t.Fatalf("Violated = %q, want I1_ConsumedAtMostOnce", res.Violated)
	}
	last := res.Trace[len(res.Trace)-1].State
	if (tcl{DefaultConfig()}).I3_OneActiveRun(last) {
		t.Errorf("last state keeps I3_OneActiveRun:\n%s", m.FormatTrace(res.Trace))
	}
}

// Every action fires with the fence, so no invariant holds vacuously for
// want of, say, a lapse; without it the refusals never fire.
func TestThreadClaimLapse_coverage_everyActionFires(t *testing.T) {
	fenced := Check(model(t, true))
	for _, name := range model(t, true).ActionNames() {
		if fenced.Coverage[name] == 0 {
			t.Errorf("FENCE = TRUE: %s never fires", name)
		}
	}
	m := model(t, false)
	m.Invariants = nil
	open := Check(m)
	t.Logf("FENCE = FALSE: %d distinct states explored to the end, depth %d", open.Distinct, open.Depth)
	if open.Distinct != nofenceDistinct {
		t.Errorf("distinct states = %d, recorded %d", open.Distinct, nofenceDistinct)
	}
	for _, name := range m.ActionNames() {
		refusal := name == "StartFenced" || name == "ReplyFenced"
		if fired := open.Coverage[name] > 0; fired == refusal {
			t.Errorf("FENCE = FALSE: %s fired %d times", name, open.Coverage[name])
		}
	}
}

// Larger constants than the .cfg's still keep every invariant; they are
// not recorded, being there for reach, not for drift.
func TestThreadClaimLapse_largerConstants_invariantsHold(t *testing.T) {
	for _, c := range []Config{
		{Procs: 3, NumMsgs: 2, MaxClaims: 3, Fence: true},
		{Procs: 2, NumMsgs: 3, MaxClaims: 5, Fence: true},
		{Procs: 3, NumMsgs: 3, MaxClaims: 4, Fence: true},
	} {
		m, err := ThreadClaimLapse(c)
		if err != nil {
			t.Fatal(err)
		}
		res := Check(m)
		t.Logf("%+v: %d distinct states, depth %d", c, res.Distinct, res.Depth)
		if res.Violated != "" {
			t.Errorf("%+v: %s violated:\n%s", c, res.Violated, m.FormatTrace(res.Trace))
		}
	}
}

func TestConfig_Validate_outOfRange(t *testing.T) {
	for _, c := range []Config{
		{Procs: 0, NumMsgs: 2, MaxClaims: 3},
		{Procs: maxProcs + 1, NumMsgs: 2, MaxClaims: 3},
		{Procs: 2, NumMsgs: 0, MaxClaims: 3},
		{Procs: 2, NumMsgs: maxMsgs + 1, MaxClaims: 3},
		{Procs: 2, NumMsgs: 2, MaxClaims: 0},
		{Procs: 2, NumMsgs: 2, MaxClaims: maxClaims + 1},
	} {
		if _, err := ThreadClaimLapse(c); err == nil {
			t.Errorf("ThreadClaimLapse(%+v) = nil error", c)
		}
	}
}
