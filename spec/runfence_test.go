package spec

import "testing"

func TestRunFence_explore(t *testing.T) {
	for name, c := range map[string]Config{"window": WindowConfig(), "guard": GuardConfig(), "runfence": RunFenceConfig(), "runfence_forger": RunFenceForgerConfig()} {
		m, err := ThreadClaimLapse(c)
		if err != nil {
			t.Fatal(err)
		}
		res := CheckAll(m)
		t.Logf("%s: %d distinct, %d transitions, depth %d, violated %q", name, res.Distinct, res.Transitions, res.Depth, res.Violated)
		for n, tr := range res.Failures {
			t.Logf("  %s: %d states: %v", n, len(tr), actions(t, tr))
		}
		for _, a := range m.ActionNames() {
			if res.Coverage[a] == 0 {
				t.Logf("  %s never fires", a)
			}
		}
	}
}
