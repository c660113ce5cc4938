package owner_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/runner/owner"
)

// Over seeds, runners join, leave, freeze and come back at random, with
// time passing; once the churn stops and every runner is back, each
// partition has exactly one owner, the live runner Assign gives it to, and
// the bucket names it.
func TestCore_property(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { churn(t, seed) })
	}
}

func churn(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	P := 1 + rng.IntN(40)
	w := newGroup(t, P)
	next := 0
	join := func() {
		next++
		w.addQuiet(fmt.Sprintf("r%d", next), w.clock)
		w.members()
	}
	for range 1 + rng.IntN(4) {
		join()
	}
	for range 60 {
		var alive, frozen []*node
		for _, n := range w.nodes {
			if n.frozen {
				frozen = append(frozen, n)
			} else {
				alive = append(alive, n)
			}
		}
		switch x := rng.IntN(10); {
		case x == 0 && len(w.nodes) < 8:
			join()
		case x == 1 && len(alive) > 1: // a graceful leave
			n := alive[rng.IntN(len(alive))]
			n.step(owner.Leave{})
			n.settle()
			if !n.seen[len(n.seen)-1].Done {
				t.Fatalf("seed %d: %s's leave is not done", seed, n.sess)
			}
			w.nodes = slices.DeleteFunc(w.nodes, func(m *node) bool { return m == n })
			w.members()
		case x == 2 && len(alive) > 1:
			alive[rng.IntN(len(alive))].frozen = true
			if rng.IntN(2) == 0 {
				w.members() // its session lapsed, as the others see it
			}
		case x == 3 && len(frozen) > 0:
			thaw(w, frozen[rng.IntN(len(frozen))], rng)
		default:
			w.tick(time.Duration(1+rng.IntN(int(ttl/time.Millisecond))) * time.Millisecond)
		}
	}
	for _, n := range w.nodes {
		if n.frozen {
			thaw(w, n, rng)
		}
	}
	w.members()
	w.run(3 * ttl)
	w.settled()
}

// thaw brings n back: with its session, or (it lapsed) with a new one.
func thaw(w *group, n *node, rng *rand.Rand) {
	n.frozen = false
	n.step(owner.Tick{})
	n.settle()
	if rng.IntN(2) == 0 {
		n.step(owner.SessionLost{})
		n.sess += "'"
		n.step(owner.SessionOpened{ID: n.sess})
		n.settle()
	}
	w.members()
}
