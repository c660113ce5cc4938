package runner

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/artifactr/artifactr/actors/runner/owner"
	"github.com/artifactr/artifactr/actors/runner/sched"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/sys"
)

// partitionOpener is a work source split by partition (natsstore's
// WorkQueue): a runner that owns partitions pulls only theirs. The result
// type is spelled out, not [WorkReleaser], so that the store's package
// need not import this one.
type partitionOpener interface {
	OpenPartition(ctx context.Context, p int) (interface {
		Next(context.Context) (string, func(), error)
		Stop()
		Release()
	}, error)
}

// ownStart opens the ownership core with the runner's first session. It
// is sent once the runner actor's PID is known, as its lease calls report
// back to it.
type ownStart struct{}

// leave starts a graceful stop with partitions: hand every partition over
// first, then drain what is left.
type leave struct{}

// ownership is the runner actor's part in partition ownership (issue 29),
// with P > 1: an owner.Core decides which partitions this runner owns,
// and the actor carries out its Readys (lease calls off the loop, follows
// and work pulls per partition, drains through the scheduler's Disowned).
// The actor's goroutine owns it, as it owns the scheduler.
type ownership struct {
	oc     *owner.Core
	n      int
	leaser events.PartitionLeaser
	opener partitionOpener // nil: pull Config.Work whole, if set

	session string          // the session partitions are owned under
	live    map[string]bool // session keys the lease watch reports
	known   bool            // the lease watch caught up since its (re)start
	wake    time.Time       // the core's timer, as its Ready last said
	running map[int]context.CancelFunc
	// open are the followed partitions whose tail is open, with the
	// follow that opened it: claims wait for it (owns), since a claim's
	// later events reach its actor only through the follow.
	open     map[int]uint64
	opening  map[int]uint64 // the current follow of each followed partition
	follows  uint64         // follows started, to tell them apart
	draining map[int]bool
	leaving  bool // a graceful stop waits for the core's Done
}

// partitionView is what Runner.Partitions reports; the actor publishes it.
type partitionView struct {
	mu        sync.Mutex // protects owned and following
	owned     []int
	following []int
	routed    []atomic.Int64  // events routed, by partition
	last      []atomic.Uint64 // the last sequence routed, by partition
}

func newOwnership(r *Runner, session string) *ownership {
	n := r.subjects.PartitionCount()
	o := &ownership{
		oc:       owner.New(owner.Config{Partitions: n, TTL: r.cfg.ClaimTTL}),
		n:        n,
		leaser:   r.store.(events.PartitionLeaser),
		session:  session,
		live:     map[string]bool{},
		running:  map[int]context.CancelFunc{},
		open:     map[int]uint64{},
		opening:  map[int]uint64{},
		draining: map[int]bool{},
	}
	o.opener, _ = r.cfg.Work.(partitionOpener)
	return o
}

// owns is the scheduler's ownership hook: this runner claims a thread only
// while it owns the thread's partition and follows it. A claim made before
// the partition's tail opened could miss the events between its history
// and the tail's start, its own writes among them.
func (o *ownership) owns(th string) bool {
	p := events.Partition(th, o.n)
	_, open := o.open[p]
	return open && o.oc.Claims(p)
}

// followOpen says partition p's tail is open, for the follow gen.
type followOpen struct {
	p   int
	gen uint64
}

// followOpened lets claims of p start, if the follow that opened its tail
// is still the current one.
func (o *ownership) followOpened(m followOpen) {
	if g, ok := o.opening[m.p]; ok && g == m.gen {
		o.open[m.p] = m.gen
	}
}

// ownStep feeds ev to the ownership core and carries out its Ready.
func (ra *runnerActor) ownStep(ctx actor.Context, ev owner.Event) {
	o, r := ra.own, ra.r
	rd := o.oc.Step(owner.Input{Now: nowFunc(), Event: ev})
	if rd.Read {
		r.goDo(func() {
			cctx, cancel := context.WithTimeout(r.ctx, r.cfg.CallTimeout)
			defer cancel()
			ls, err := o.leaser.PartitionLeases(cctx, o.n)
			r.send(owner.Leases{Leases: ls, Err: err})
		})
	}
	for _, p := range rd.Acquire {
		sess := o.session
		r.goDo(func() {
			cctx, cancel := context.WithTimeout(r.ctx, r.cfg.CallTimeout)
			defer cancel()
			l, err := o.leaser.AcquirePartition(cctx, p, sess, r.cfg.ID, r.cfg.ClaimTTL)
			r.send(owner.Acquired{Partition: p, Lease: l, Err: err})
		})
	}
	for _, l := range rd.Renew {
		r.goDo(func() {
			cctx, cancel := context.WithTimeout(r.ctx, r.cfg.CallTimeout)
			defer cancel()
			nl, err := o.leaser.RenewPartition(cctx, l)
			r.send(owner.Renewed{Partition: l.Partition, Lease: nl, Err: err})
		})
	}
	for _, l := range rd.Release {
		r.goDo(func() {
			cctx, cancel := context.WithTimeout(r.ctx, r.cfg.CallTimeout)
			defer cancel()
			r.send(owner.Released{Partition: l.Partition, Err: o.leaser.ReleasePartition(cctx, l)})
		})
	}
	for _, p := range rd.Follow {
		ra.followPartition(p)
	}
	for _, p := range rd.Unfollow {
		if stop := o.running[p]; stop != nil {
			stop()
			delete(o.running, p)
		}
		delete(o.open, p)
		delete(o.opening, p)
	}
	if len(rd.Drain) > 0 {
		for _, p := range rd.Drain {
			o.draining[p] = true
		}
		ra.step(ctx, sched.Disowned{}, nil)
		ra.maybeDrained(ctx)
	}
	o.wake = rd.Wake
	ra.rearm()
	r.publishPartitions(o.oc.Owned(), o.oc.Following())
	if rd.Done && o.leaving {
		o.leaving = false
		ra.step(ctx, sched.Drain{}, nil)
	}
}

// maybeDrained reports the partitions being handed over whose threads are
// neither held nor being claimed here any more.
func (ra *runnerActor) maybeDrained(ctx actor.Context) {
	o := ra.own
	for _, p := range slices.Sorted(maps.Keys(o.draining)) {
		if !ra.s.Holds(func(th string) bool { return events.Partition(th, o.n) == p }) {
			delete(o.draining, p)
			ra.ownStep(ctx, owner.Drained{Partition: p})
		}
	}
}

// leaseChanged keeps the live sessions the ownership core divides the
// partitions among, from the lease watch's session keys.
func (ra *runnerActor) ownLeaseChanged(ctx actor.Context, ev sched.Event) {
	o := ra.own
	switch ev := ev.(type) {
	case sched.LeaseWatchReset:
		o.live, o.known = map[string]bool{}, false
		return
	case sched.LeaseChanged:
		u := ev.Update
		switch {
		case u.CaughtUp:
			o.known = true
		case u.Thread == "" && u.Session != "":
			if u.Present {
				o.live[u.Session] = true
			} else {
				delete(o.live, u.Session)
			}
		default:
			return
		}
		if o.known {
			ra.ownStep(ctx, owner.Members{Live: slices.Sorted(maps.Keys(o.live))})
		}
	case sched.SessionOpened:
		o.session = ev.Session.ID
		ra.ownStep(ctx, owner.SessionOpened{ID: ev.Session.ID})
	case sched.SessionLost:
		o.session = ""
		ra.ownStep(ctx, owner.SessionLost{})
	}
}

// followPartition follows partition p's stream and pulls its work, until
// Unfollow or the runner's end. The follow starts after the stream's last
// event, read first; once its tail is open the runner claims p's threads,
// pulls p's wake-ups, and looks at every thread ever posted to in p (a peek
// claims those with work), so a thread a drained owner left with work is
// found.
func (ra *runnerActor) followPartition(p int) {
	o, r := ra.own, ra.r
	if stop := o.running[p]; stop != nil {
		stop() // never two follows of one partition
	}
	ctx, cancel := context.WithCancel(r.ctx)
	o.running[p] = cancel
	o.follows++
	gen := o.follows
	o.opening[p] = gen
	delete(o.open, p)
	r.goDo(func() {
		last, ok := r.partitionLast(ctx, p)
		if !ok {
			return
		}
		from := last + 1
		if _, known := r.store.(events.PartitionReader); !known {
			from = 0
		}
		t := r.openTail(ctx, p, from)
		if t == nil {
			return
		}
		r.send(followOpen{p: p, gen: gen})
		if o.opener != nil {
			r.goDo(func() { r.pullPartition(ctx, p, o.opener) })
		}
		r.goDo(func() { r.lookAtPartition(ctx, p) })
		r.follow(ctx, p, t, last)
	})
}

// partitionLast reads the sequence partition p's stream ends at, retrying
// until it can or ctx ends; 0 (and true) when the store cannot say.
func (r *Runner) partitionLast(ctx context.Context, p int) (uint64, bool) {
	pr, ok := r.store.(events.PartitionReader)
	if !ok {
		return 0, true
	}
	b := sys.NewBackoff(50*time.Millisecond, 2*time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
		last, err := pr.LastPartitionSeq(cctx, p)
		cancel()
		if err == nil {
			return last, true
		}
		if ctx.Err() != nil {
			return 0, false
		}
		r.log.Warn("cannot read a partition's last sequence; retrying", "partition", p, "err", err)
		if !b.Wait(ctx) {
			return 0, false
		}
	}
}

// lookAtPartition has the runner look at every thread of partition p that
// was ever posted to.
func (r *Runner) lookAtPartition(ctx context.Context, p int) {
	list := func(ctx context.Context) ([]string, error) {
		if pr, ok := r.store.(events.PartitionReader); ok {
			return pr.PartitionThreads(ctx, p)
		}
		lister, ok := r.store.(events.ThreadLister)
		if !ok {
			return nil, nil
		}
		return lister.Threads(ctx)
	}
	b := sys.NewBackoff(50*time.Millisecond, 2*time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
		ths, err := list(cctx)
		cancel()
		if err == nil {
			for _, th := range ths {
				if events.Partition(th, r.subjects.PartitionCount()) == p {
					r.send(sched.LookAt{Thread: th})
				}
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("cannot list a partition's threads; retrying", "partition", p, "err", err)
		if !b.Wait(ctx) {
			return
		}
	}
}

// pullPartition feeds partition p's wake-ups to the runner actor until ctx
// ends, then hands back those not acknowledged, for p's next owner.
func (r *Runner) pullPartition(ctx context.Context, p int, opener partitionOpener) {
	var w interface {
		Next(context.Context) (string, func(), error)
		Stop()
		Release()
	}
	b := sys.NewBackoff(50*time.Millisecond, 2*time.Second)
	for w == nil {
		cctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
		var err error
		w, err = opener.OpenPartition(cctx, p)
		cancel()
		if err != nil {
			r.log.Warn("cannot open a partition's work queue; retrying", "partition", p, "err", err)
			if !b.Wait(ctx) {
				return
			}
		}
	}
	defer func() {
		if r.stopCalled.Load() && r.ctx.Err() != nil {
			w.Stop() // killed: a crash hands nothing back
			return
		}
		w.Release()
	}()
	for {
		th, ack, err := w.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Error("partition work source ended", "partition", p, "err", err)
			}
			return
		}
		r.send(sched.Woken{Thread: th, Ack: ack})
	}
}

// rearm arms the one timer for the earlier of the scheduler's and the
// ownership core's.
func (ra *runnerActor) rearm() {
	at := ra.schedWake
	if o := ra.own; o != nil && !o.wake.IsZero() && (at.IsZero() || o.wake.Before(at)) {
		at = o.wake
	}
	if !at.Equal(ra.armed) {
		ra.armed = at
		ra.r.armTimer(at)
	}
}

func (r *Runner) publishPartitions(owned, following []int) {
	r.parts.mu.Lock()
	r.parts.owned, r.parts.following = owned, following
	r.parts.mu.Unlock()
}

// Partitions returns the partitions this runner owns (claims the threads
// of) and those it follows (owned, or being handed over). Both are nil on
// a store of one partition, which every runner follows whole.
func (r *Runner) Partitions() (owned, following []int) {
	r.parts.mu.Lock()
	defer r.parts.mu.Unlock()
	return slices.Clone(r.parts.owned), slices.Clone(r.parts.following)
}

// RoutedFrom returns how many events the runner's follows of partition p
// routed: zero for a partition it never followed.
func (r *Runner) RoutedFrom(p int) int64 {
	if p < 0 || p >= len(r.parts.routed) {
		return 0
	}
	return r.parts.routed[p].Load()
}
