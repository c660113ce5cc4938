package eventstest

import (
	"fmt"
	"testing"

	"github.com/artifactr/artifactr/events"
)

// Layout chooses where a seeded run's claim markers are: the simulations
// (test/sim, test/sim/runners, test/sim/partitions) take one.
type Layout uint8

const (
	// LayoutClaim: markers on the claim subject, the fence on it.
	LayoutClaim Layout = iota
	// LayoutRun: events.Subjects.RunFence (RUNFENCE, issue 23): markers
	// and releases on the run subject, every holder write a
	// compare-and-set on it (natsstore.FenceRun).
	LayoutRun
	// LayoutBySeed: [RunFenced] of the seed says.
	LayoutBySeed
)

// RunFenced says which seeds LayoutBySeed runs in the run layout: every
// other pair (2, 3, 6, 7, ...), so that memstore's log modes, which the
// simulations take from the seed's parity, each get both layouts. It draws
// nothing from the seed's PRNG: a seed in the claim layout does what it did
// before the run layout existed.
func RunFenced(seed uint64) bool { return seed>>1&1 == 1 }

// RunFence reports whether seed runs in the run layout under l.
func (l Layout) RunFence(seed uint64) bool {
	switch l {
	case LayoutRun:
		return true
	case LayoutBySeed:
		return RunFenced(seed)
	}
	return false
}

func (l Layout) String() string {
	switch l {
	case LayoutClaim:
		return "claim"
	case LayoutRun:
		return "run"
	case LayoutBySeed:
		return "by seed"
	}
	return fmt.Sprintf("Layout(%d)", uint8(l))
}

// ParseLayout parses a simulation's fence flag: "claim", "run", or "seed"
// (or "", the default) for LayoutBySeed.
func ParseLayout(s string) (Layout, error) {
	switch s {
	case "", "seed":
		return LayoutBySeed, nil
	case "claim":
		return LayoutClaim, nil
	case "run":
		return LayoutRun, nil
	}
	return 0, fmt.Errorf("fence layout %q: want claim, run or seed", s)
}

// LayoutOf is the layout a run took: LayoutRun when runFence, else
// LayoutClaim. Its String is the fence flag that replays it.
func LayoutOf(runFence bool) Layout {
	if runFence {
		return LayoutRun
	}
	return LayoutClaim
}

// FlagLayout is [ParseLayout] of a simulation's fence flag, named flag,
// whose value is v: a bad one fails t.
func FlagLayout(t testing.TB, flag, v string) Layout {
	t.Helper()
	l, err := ParseLayout(v)
	if err != nil {
		t.Fatalf("%s: %v", flag, err)
	}
	return l
}

// CheckLayoutBySeed checks that LayoutBySeed runs half of seeds 0..7 in
// each layout and that a seed does under LayoutBySeed what it does in its
// layout named outright. run runs a seed under a layout and returns
// whether it ran in the run layout and its trace.
func CheckLayoutBySeed(t *testing.T, run func(seed uint64, l Layout) (runFence bool, trace string)) {
	t.Helper()
	fenced := 0
	for seed := uint64(0); seed < 8; seed++ {
		rf, trace := run(seed, LayoutBySeed)
		if rf != RunFenced(seed) {
			t.Fatalf("seed %d: ran in the run layout %v, RunFenced says %v", seed, rf, RunFenced(seed))
		}
		want := LayoutClaim
		if rf {
			fenced++
			want = LayoutRun
		}
		if _, one := run(seed, want); one != trace {
			t.Fatalf("seed %d in the %s layout ran otherwise by seed", seed, want)
		}
	}
	if fenced != 4 {
		t.Fatalf("%d of 8 seeds in the run layout, want 4", fenced)
	}
}

// Misplaced says why env, a claim marker or release, is not on the subject
// subj's layout keeps it on, or "" when it is, or env is no marker: the
// simulations' CheckLayout.
func Misplaced(subj events.Subjects, env events.Envelope) string {
	typ := events.TypeOf(env.Event)
	if !typ.Marker() || env.Kind == subj.KindOf(typ) {
		return ""
	}
	return fmt.Sprintf("%s at seq %d on the %s subject, the layout's is %s", typ, env.Seq, env.Kind, subj.KindOf(typ))
}
