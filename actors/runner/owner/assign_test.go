package owner_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/artifactr/artifactr/actors/runner/owner"
)

func sessions(rng *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("s%d-%016x", i, rng.Uint64())
	}
	return out
}

// Every partition falls to one of the sessions, each gets ⌊P/R⌋ or
// ⌈P/R⌉, and the order of the sessions (or a repeat) changes nothing.
func TestAssign_balanced(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		P, R := 1+rng.IntN(200), 1+rng.IntN(20)
		ss := sessions(rng, R)
		a := owner.Assign(P, ss)
		count := map[string]int{}
		for p, s := range a {
			if !slices.Contains(ss, s) {
				t.Fatalf("P=%d R=%d: partition %d falls to %q", P, R, p, s)
			}
			count[s]++
		}
		lo, hi := P/R, (P+R-1)/R
		for _, s := range ss {
			if c := count[s]; c < lo || c > hi {
				t.Fatalf("P=%d R=%d: %s has %d, want %d..%d", P, R, s, c, lo, hi)
			}
		}
		shuffled := slices.Clone(ss)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		shuffled = append(shuffled, ss[0], "")
		if b := owner.Assign(P, shuffled); !slices.Equal(a, b) {
			t.Fatalf("P=%d R=%d: the order of the sessions changed the assignment", P, R)
		}
	}
	if a := owner.Assign(4, nil); !slices.Equal(a, []string{"", "", "", ""}) {
		t.Fatalf("no sessions: %q", a)
	}
}

// A join or a leave moves few partitions: on average at most 1.5 times the
// least that must move (P/R of the larger group), and never more than
// 3.5 times, for P = 64 and 2..12 runners. A reshuffle (round robin over
// sorted sessions) moves most of them.
func TestAssign_movement(t *testing.T) {
	const P = 64
	rng := rand.New(rand.NewPCG(3, 4))
	var moved, ideal float64
	for range 200 {
		R := 2 + rng.IntN(11)
		ss := sessions(rng, R+1)
		small, big := owner.Assign(P, ss[:R]), owner.Assign(P, ss)
		m := owner.Moved(small, big)
		least := float64(P) / float64(R+1)
		if float64(m) > 3.5*least {
			t.Fatalf("R %d->%d moved %d partitions; the least is %.1f", R, R+1, m, least)
		}
		moved += float64(m)
		ideal += least
	}
	t.Logf("a join or leave moves %.2f times the least on average", moved/ideal)
	if moved > 1.5*ideal {
		t.Fatalf("moved %.0f partitions over the joins, %.2f times the least", moved, moved/ideal)
	}
}
