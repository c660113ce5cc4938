package runners_test

import (
	"testing"

	"github.com/artifactr/artifactr/projections/audit"
	"github.com/artifactr/artifactr/test/sim/runners"
)

// controlSeeds bounds the unfenced control: some seed in 1..controlSeeds
// must break a safety check. On memstore seed 163 is the first today; on
// natsstore, whose session ids are its own, the first varies by run (57
// in one).
const controlSeeds = 500

// safety reports whether check is one the fence exists for: a message
// consumed twice or two runs at once in the log (I1, I3), or handed to
// agents twice.
func safety(check string) bool {
	return check == audit.CheckI1 || check == audit.CheckI3 || check == runners.CheckHandedOutOnce
}

// unfencedControl runs seeds 1..controlSeeds with the fence switched off
// (eventstest.Unfenced on every runner's handle) until one breaks a safety
// check: if none does, the checks cannot fail, and a green run proves
// nothing.
func unfencedControl(t *testing.T, cfg runners.Config) {
	t.Helper()
	// The audit's fence checks (each consuming append carries the fence)
	// break at once without it; what must break is what the fence is for.
	cfg.Unfenced, cfg.Fatal = true, safety
	other := map[string]int{}
	for seed := uint64(1); seed <= controlSeeds; seed++ {
		r := runners.Run(seed, cfg)
		switch {
		case r.Check == runners.CheckStore:
			t.Fatalf("seed %d unfenced: %s", seed, r.Failure)
		case safety(r.Check):
			t.Logf("without the fence, seed %d breaks %s at step %d: %s (other checks broke %v times in seeds 1..%d)", seed, r.Check, r.Steps, r.Failure, other, seed)
			return
		}
		for c, n := range r.Ignored {
			other[c] += n
		}
	}
	t.Fatalf("without the fence, no seed in 1..%d broke I1, I3 or %s (others broke: %v): the checks cannot fail", controlSeeds, runners.CheckHandedOutOnce, other)
}

// TestRunners_unfencedControl is the control on memstore.
func TestRunners_unfencedControl(t *testing.T) {
	unfencedControl(t, runners.Config{Steps: *flagSteps})
}

// TestRunners_natsUnfencedControl is the control on natsstore.
func TestRunners_natsUnfencedControl(t *testing.T) {
	unfencedControl(t, runners.Config{Steps: *flagSteps, NATS: natsEnv(t)})
}
