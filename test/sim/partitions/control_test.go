package partitions_test

import (
	"testing"

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
	cfg := partitions.Small()
	cfg.Unfenced, cfg.Fatal = true, partitions.Safety
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
			t.Logf("without the fence, seed %d breaks %s at step %d: %s (other checks broke %v times before)", seed, r.Check, r.Steps, r.Failure, other)
			return
		}
	}
	t.Fatalf("without the fence, no seed of 1..%d broke I1 or I3 (others broke %v): the checks cannot fail", controlSeeds, other)
}
