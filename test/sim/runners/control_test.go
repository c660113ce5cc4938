package runners_test

import (
	"testing"

	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/projections/audit"
	"github.com/artifactr/artifactr/test/sim/runners"
)

// controlSeeds bounds the unfenced control: some seed of controlSeeds in a
// row must break a safety check. On memstore seed 163 is the first today.
const controlSeeds = 500

// safety reports whether check is one the fence exists for: a message
// consumed twice or two runs at once in the log (I1, I3), or handed to
// agents twice.
func safety(check string) bool {
	return check == audit.CheckI1 || check == audit.CheckI3 || check == runners.CheckHandedOutOnce
}

// unfencedControl runs seeds from on, with the fence switched off
// (eventstest.Unfenced on every runner's handle), until one breaks a safety
// check, and returns it: if none of controlSeeds does, the checks cannot
// fail, and a green run proves nothing.
func unfencedControl(t *testing.T, cfg runners.Config, from uint64) uint64 {
	t.Helper()
	// The audit's fence checks (each consuming append carries the fence)
	// break at once without it; what must break is what the fence is for.
	cfg.Unfenced, cfg.Fatal = true, safety
	other := map[string]int{}
	for seed := from; seed < from+controlSeeds; seed++ {
		r := runners.Run(seed, cfg)
		if r.Check == runners.CheckStore {
			t.Fatalf("seed %d unfenced: %s", seed, r.Failure)
		}
		for c, n := range r.Ignored {
			other[c] += n
		}
		if safety(r.Check) {
			t.Logf("without the fence, seed %d breaks %s at step %d: %s (other checks broke %v times in seeds %d..%d)", seed, r.Check, r.Steps, r.Failure, other, from, seed)
			return seed
		}
	}
	t.Fatalf("without the fence, no seed in %d..%d broke I1, I3 or %s (others broke: %v): the checks cannot fail", from, from+controlSeeds-1, runners.CheckHandedOutOnce, other)
	return 0
}

// TestRunners_unfencedControl is the control on memstore, on the claim
// subject's layout.
func TestRunners_unfencedControl(t *testing.T) {
	unfencedControl(t, runners.Config{Steps: *flagSteps}, 1)
}

// TestRunners_runFenceUnfencedControl is the control on memstore with the
// markers on the run subject (RUNFENCE): the consuming writes' check on the
// run subject dropped (eventstest.Unfenced), the non-consuming ones'
// compare-and-set kept.
func TestRunners_runFenceUnfencedControl(t *testing.T) {
	unfencedControl(t, runners.Config{Steps: *flagSteps, Layout: eventstest.LayoutRun}, 1)
}

// TestRunners_natsUnfencedControl is the control on natsstore. It starts
// at the first seed that breaks on memstore, which a natsstore seed's world
// shares (its session ids aside), so it costs a few seeds on the server,
// not a few hundred.
func TestRunners_natsUnfencedControl(t *testing.T) {
	from := unfencedControl(t, runners.Config{Steps: *flagSteps}, 1)
	unfencedControl(t, runners.Config{Steps: *flagSteps, NATS: natsEnv(t)}, from)
}
