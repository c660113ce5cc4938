package partitions_test

import (
	"testing"

	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/test/sim/partitions"
)

// controlSeeds bounds the unfenced control: some seed of these must break
// I1 or I3 without the fence, or a green run proves nothing.
const controlSeeds = 200

// TestPartitions_unfencedControl runs seeds with the fence switched off
// (eventstest.Unfenced on every runner's handle) and the audit's fence
// checks let pass, until one breaks I1 or I3: a runner that owned a
// partition, froze and came back still writes for a thread that its new
// owner took meanwhile.
func TestPartitions_unfencedControl(t *testing.T) {
	unfencedControl(t, eventstest.LayoutClaim)
}

// TestPartitions_runFenceUnfencedControl is the control on the run
// subject's layout (RUNFENCE): the consuming writes' compare-and-set on
// the run subject dropped, the run end's kept.
func TestPartitions_runFenceUnfencedControl(t *testing.T) {
	unfencedControl(t, eventstest.LayoutRun)
}

func unfencedControl(t *testing.T, l eventstest.Layout) {
	cfg := partitions.Small()
	cfg.Unfenced, cfg.Fatal, cfg.Layout = true, partitions.Safety, l
	other := map[string]int{}
	for seed := uint64(1); seed <= controlSeeds; seed++ {
		r := partitions.Run(seed, cfg)
		if r.Check == partitions.CheckStore {
			t.Fatalf("seed %d unfenced: %s", seed, r.Failure)
		}
		for c, n := range r.Ignored {
			other[c] += n
		}
		if partitions.Safety(r.Check) {
			t.Logf("without the fence, on the %s layout, seed %d breaks %s at step %d: %s (other checks broke %v times before)", l, seed, r.Check, r.Steps, r.Failure, other)
			return
		}
	}
	t.Fatalf("without the fence, on the %s layout, no seed of 1..%d broke I1 or I3 (others broke %v): the checks cannot fail", l, controlSeeds, other)
}

// TestPartitions_twoBelievedOwners shows the fence at work with ownership
// in doubt: within 50 seeds, one has a run started for a thread whose
// partition two live runners both believed they owned (a thawed runner
// before its core stepped) refused by the fence, and every check holds.
// On each layout.
func TestPartitions_twoBelievedOwners(t *testing.T) {
	for _, l := range []eventstest.Layout{eventstest.LayoutClaim, eventstest.LayoutRun} {
		t.Run(l.String(), func(t *testing.T) {
			cfg := partitions.Small()
			cfg.Layout = l
			for seed := uint64(1); seed <= 50; seed++ {
				r := partitions.Run(seed, cfg)
				if r.Failed() {
					t.Fatalf("seed %d: %s: %s", seed, r.Check, r.Failure)
				}
				if r.Figures.SharedRefused > 0 {
					t.Logf("seed %d: %d runs started by one of two believed owners, %d refused by the fence", seed, r.Figures.Shared, r.Figures.SharedRefused)
					return
				}
			}
			t.Fatal("no seed of 1..50 had a write of one of two believed owners refused: the simulation does not reach the case")
		})
	}
}
