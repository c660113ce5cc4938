package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/testkit"
)

// ownerLog follows, from snapshots of Runner.Partitions, which runner owns
// each partition, and counts the moves: a partition seen owned by one
// runner, then by another.
type ownerLog struct {
	mu       sync.Mutex // protects the fields below
	last     []string   // partition -> the runner last seen owning it
	moves    int
	overlaps int      // snapshots with a partition two runners believe they own
	trail    []string // the latest moves, for a failure's message
}

// since returns the moves recorded after t.
func (o *ownerLog) since(t time.Time) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	stamp := t.Format("15:04:05.000")
	var out []string
	for _, m := range o.trail {
		if m[:len(stamp)] >= stamp {
			out = append(out, m)
		}
	}
	return out
}

func (o *ownerLog) counts() (moves, overlaps int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.moves, o.overlaps
}

// watchOwners samples the live runners' partitions until stopped (with
// P > 1; otherwise it does nothing). Sampling misses an owner that comes
// and goes between two samples, so the count is a lower bound.
func (h *harness) watchOwners() (stop func()) {
	if h.cfg.partitions <= 1 {
		return func() {}
	}
	h.owners.last = make([]string, h.cfg.partitions)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			h.sampleOwners()
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}

func (h *harness) sampleOwners() {
	owners := make([][]string, h.cfg.partitions)
	for _, sl := range h.slots {
		sl.mu.Lock()
		r, id := sl.r, sl.id
		sl.mu.Unlock()
		if r == nil {
			continue
		}
		owned, _ := r.Partitions()
		for _, p := range owned {
			owners[p] = append(owners[p], id)
		}
	}
	o := &h.owners
	o.mu.Lock()
	defer o.mu.Unlock()
	for p, ids := range owners {
		if len(ids) > 1 {
			o.overlaps++
		}
		for _, id := range ids {
			if o.last[p] != id {
				if o.last[p] != "" {
					o.moves++
					o.trail = append(o.trail, fmt.Sprintf("%s partition %d: %s -> %s (owners %v)", time.Now().Format("15:04:05.000"), p, o.last[p], id, ids))
					if len(o.trail) > 64 {
						o.trail = o.trail[1:]
					}
				}
				o.last[p] = id
			}
		}
	}
}

// checkLeaders waits for every partition stream's leader and, with more
// than one partition, checks they are spread: no node leads more than
// ⌈P/3⌉ of them (natsstore spreads them when it creates the streams).
func (h *harness) checkLeaders() {
	h.t.Helper()
	leaders := map[string][]int{}
	for p, stream := range h.streams() {
		l := h.cluster.WaitForStreamLeader(stream, 30*time.Second)
		leaders[l.Name()] = append(leaders[l.Name()], p)
	}
	n := len(h.streams())
	if n == 1 {
		return
	}
	most := (n + len(h.cluster.Nodes) - 1) / len(h.cluster.Nodes)
	h.t.Logf("%s: partition leaders by node: %v", h.cfg.name, leaders)
	for _, node := range slices.Sorted(maps.Keys(leaders)) {
		if ps := leaders[node]; len(ps) > most {
			h.t.Errorf("leaders not spread: %s leads partitions %v, more than %d of %d on %d nodes", node, ps, most, n, len(h.cluster.Nodes))
		}
	}
}

// liveRunners returns the slots' running runners.
func (h *harness) liveRunners() []*runner.Runner {
	var rs []*runner.Runner
	for _, sl := range h.slots {
		sl.mu.Lock()
		if sl.r != nil {
			rs = append(rs, sl.r)
		}
		sl.mu.Unlock()
	}
	return rs
}

// ownershipSettled reports whether the runners divide the n partitions:
// each owned by exactly one, each runner following exactly what it owns,
// none owning more than ⌈n/R⌉. It returns the owner of each partition.
func ownershipSettled(n int, rs []*runner.Runner) (ok bool, state string, owner []*runner.Runner) {
	owner = make([]*runner.Runner, n)
	most := (n + len(rs) - 1) / len(rs)
	for _, r := range rs {
		owned, following := r.Partitions()
		if !slices.Equal(owned, following) || len(owned) > most {
			return false, fmt.Sprintf("%s owns %v, follows %v", r.ID(), owned, following), nil
		}
		for _, p := range owned {
			if owner[p] != nil {
				return false, fmt.Sprintf("partition %d owned by %s and %s", p, owner[p].ID(), r.ID()), nil
			}
			owner[p] = r
		}
	}
	if i := slices.Index(owner, nil); i >= 0 {
		return false, fmt.Sprintf("partition %d owned by none", i), nil
	}
	return true, "", owner
}

// checkOwnership runs after the drain, every runner up: the runners settle
// into dividing the partitions, and one post to a thread of each partition
// is routed by its owner alone (each event goes to one runner, issue 29).
func (h *harness) checkOwnership() {
	h.t.Helper()
	n := h.cfg.partitions
	rs := h.liveRunners()
	var owner []*runner.Runner
	testkit.WaitFor(h.t, 30*time.Second, "the runners to divide the partitions", func() (bool, string) {
		ok, state, o := ownershipSettled(n, rs)
		owner = o
		return ok, state
	})
	settledAt := time.Now()
	before := make([][]int64, len(rs))
	for i, r := range rs {
		for p := range n {
			before[i] = append(before[i], r.RoutedFrom(p))
		}
	}
	for p := range n {
		i := slices.IndexFunc(h.threads, func(th string) bool { return events.Partition(th, n) == p })
		id := fmt.Sprintf("o%06d", h.posts.next.Add(1))
		h.post(h.poster, h.threads[i], id, "hello "+id)
	}
	answered := map[string]time.Time{}
	testkit.WaitFor(h.t, 60*time.Second, "the posts to each partition answered", func() (bool, string) {
		ok, state, _ := h.settled(answered, h.calm)
		return ok, state
	})
	ok, state, after := ownershipSettled(n, rs)
	if !ok || !slices.Equal(after, owner) {
		h.t.Errorf("ownership moved with no faults: %s; owners %s at %s, then %s; moves since:\n%s",
			state, runnerIDs(owner), settledAt.Format("15:04:05.000"), runnerIDs(after), strings.Join(h.owners.since(settledAt), "\n"))
		return
	}
	var ids []string
	for _, r := range owner {
		ids = append(ids, r.ID())
	}
	h.t.Logf("%s: after the drain, partitions 0..%d owned by %v; each post routed by its partition's owner alone", h.cfg.name, n-1, ids)
	for i, r := range rs {
		for p := range n {
			d := r.RoutedFrom(p) - before[i][p]
			if own := owner[p] == r; own != (d > 0) {
				h.t.Errorf("%s owns partition %d: %v, yet routed %d of its events", r.ID(), p, own, d)
			}
		}
	}
}

func runnerIDs(rs []*runner.Runner) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		if r != nil {
			ids[i] = r.ID()
		}
	}
	return ids
}
