package owner_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/runner/owner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/memstore"
)

const ttl = eventstest.TTL

// node is a runner's core with a synchronous shell over a memstore lease
// bucket: each Ready's lease calls are made at once and their reports
// queued as the next inputs.
type node struct {
	t       *testing.T
	sess    string
	parts   int
	core    *owner.Core
	store   events.PartitionLeaser
	clock   *eventstest.Clock
	pending []owner.Event
	frozen  bool
	// holdDrains keeps drains for the test to report (drainsHeld);
	// otherwise a drain is reported at once.
	holdDrains bool
	drainsHeld []int
	seen       []owner.Ready // every Ready, in order
}

type group struct {
	t     *testing.T
	parts int
	log   *memstore.Log
	nodes []*node
	clock *eventstest.Clock // the clock of runners added with none
}

func newGroup(t *testing.T, parts int) *group {
	return &group{t: t, parts: parts, log: memstore.NewLog(), clock: eventstest.NewClock(0)}
}

// add starts a runner with session sess on clock (a fresh one at the
// epoch when nil) and gives every runner the new membership.
func (w *group) add(sess string, clock *eventstest.Clock) *node {
	n := w.addQuiet(sess, clock)
	w.members()
	return n
}

// addQuiet starts a runner that the others do not see yet.
func (w *group) addQuiet(sess string, clock *eventstest.Clock) *node {
	if clock == nil {
		clock = w.clock
	}
	n := &node{t: w.t, sess: sess, parts: w.parts, clock: clock, core: owner.New(owner.Config{Partitions: w.parts, TTL: ttl}),
		store: w.log.Open(memstore.Config{Now: clock.Now})}
	w.nodes = append(w.nodes, n)
	n.step(owner.SessionOpened{ID: sess})
	return n
}

// members tells every unfrozen runner the sessions of the unfrozen ones,
// as their lease watches would once a frozen one's session lapsed.
func (w *group) members(except ...*node) {
	var live []string
	for _, n := range w.nodes {
		if !n.frozen && !slices.Contains(except, n) {
			live = append(live, n.sess)
		}
	}
	for _, n := range w.nodes {
		if !n.frozen {
			n.step(owner.Members{Live: live})
		}
	}
}

func (n *node) step(ev owner.Event) owner.Ready {
	rd := n.core.Step(owner.Input{Now: n.clock.Now(), Event: ev})
	n.seen = append(n.seen, rd)
	ctx := context.Background()
	if rd.Read {
		ls, err := n.store.PartitionLeases(ctx, n.parts)
		n.pending = append(n.pending, owner.Leases{Leases: ls, Err: err})
	}
	for _, p := range rd.Acquire {
		l, err := n.store.AcquirePartition(ctx, p, n.sess, "runner-"+n.sess, ttl)
		n.pending = append(n.pending, owner.Acquired{Partition: p, Lease: l, Err: err})
	}
	for _, l := range rd.Renew {
		nl, err := n.store.RenewPartition(ctx, l)
		n.pending = append(n.pending, owner.Renewed{Partition: l.Partition, Lease: nl, Err: err})
	}
	for _, l := range rd.Release {
		n.pending = append(n.pending, owner.Released{Partition: l.Partition, Err: n.store.ReleasePartition(ctx, l)})
	}
	for _, p := range rd.Drain {
		if n.holdDrains {
			n.drainsHeld = append(n.drainsHeld, p)
		} else {
			n.pending = append(n.pending, owner.Drained{Partition: p})
		}
	}
	return rd
}

// settle feeds the runner its queued reports until none is left.
func (n *node) settle() {
	for i := 0; len(n.pending) > 0 && !n.frozen; i++ {
		if i > 10000 {
			n.t.Fatalf("%s does not settle", n.sess)
		}
		ev := n.pending[0]
		n.pending = n.pending[1:]
		n.step(ev)
	}
}

func (w *group) settle() {
	for range 3 {
		for _, n := range w.nodes {
			n.settle()
		}
	}
}

// tick moves every clock on by d (frozen runners' too: time passes for
// them, they just do not act), then ticks and settles the others.
func (w *group) tick(d time.Duration) {
	clocks := map[*eventstest.Clock]bool{}
	for _, n := range w.nodes {
		if !clocks[n.clock] {
			clocks[n.clock] = true
			n.clock.Advance(d)
		}
	}
	for _, n := range w.nodes {
		if !n.frozen {
			n.step(owner.Tick{})
		}
	}
	w.settle()
}

// run ticks every TTL/3 for d.
func (w *group) run(d time.Duration) {
	for t := time.Duration(0); t < d; t += ttl / 3 {
		w.tick(ttl / 3)
	}
}

// ownersOf returns, for each partition, the runners whose core claims it.
func (w *group) ownersOf() [][]string {
	out := make([][]string, w.parts)
	for _, n := range w.nodes {
		for _, p := range n.core.Owned() {
			out[p] = append(out[p], n.sess)
		}
	}
	return out
}

// settled checks that each partition has one owner, the unfrozen runner
// Assign gives it to, and that the bucket names it.
func (w *group) settled() {
	w.t.Helper()
	var live []string
	for _, n := range w.nodes {
		if !n.frozen {
			live = append(live, n.sess)
		}
	}
	want := owner.Assign(w.parts, live)
	ls, err := w.nodes[0].store.PartitionLeases(context.Background(), w.parts)
	if err != nil {
		w.t.Fatal(err)
	}
	for p, os := range w.ownersOf() {
		if len(os) != 1 || os[0] != want[p] || ls[p].Session != want[p] || !ls[p].Live {
			w.t.Fatalf("partition %d: owners %v, lease %+v, want %s\n%s", p, os, ls[p], want[p], w.describe(p))
		}
	}
}

func (w *group) describe(p int) string {
	var s string
	for _, n := range w.nodes {
		s += n.sess + ": " + n.core.Describe(p) + "\n"
	}
	return s
}

func (n *node) drained() {
	for _, p := range n.drainsHeld {
		n.pending = append(n.pending, owner.Drained{Partition: p})
	}
	n.drainsHeld = nil
	n.settle()
}

// since collects a field of the Readys seen after index from.
func (n *node) since(from int, f func(owner.Ready) []int) []int {
	var out []int
	for _, rd := range n.seen[from:] {
		out = append(out, f(rd)...)
	}
	slices.Sort(out)
	return out
}

func drains(rd owner.Ready) []int    { return rd.Drain }
func follows(rd owner.Ready) []int   { return rd.Follow }
func unfollows(rd owner.Ready) []int { return rd.Unfollow }
func acquires(rd owner.Ready) []int  { return rd.Acquire }
func releases(rd owner.Ready) []int {
	var out []int
	for _, l := range rd.Release {
		out = append(out, l.Partition)
	}
	return out
}

// assignedTo lists the partitions a falls to among live.
func assignedTo(parts int, live []string, s string) []int {
	var out []int
	for p, o := range owner.Assign(parts, live) {
		if o == s {
			out = append(out, p)
		}
	}
	return out
}
