package partitions

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/artifactr/artifactr/actors/runner/owner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/memstore"
)

type state uint8

const (
	alive state = iota
	frozen_
	gone
)

// runner is a simulated runner process: its ownership core, its session,
// and the threads it claims, each worked a write at a time. A thread's
// work is coarse (claim, abandon a run left by an older claim, start a run
// for the oldest message it knows pending, complete it, release when idle),
// but every write is a real one, through the fence.
type runner struct {
	name    string
	store   events.Store           // unfenced in the control
	leases  events.PartitionLeaser // the same handle, for partition leases
	sess    events.Session
	core    *owner.Core
	state   state
	leaving bool
	renewAt time.Time // when its session's renewal is due
	wake    time.Time // the core's timer
	inbox   []owner.Event
	holders int

	threads  map[string]*work
	order    []string // threads, for a seeded pick
	perPart  map[int]int
	queue    []string
	queued   map[string]bool
	rechecks []recheck
	draining map[int]bool
}

type recheck struct {
	thread string
	at     time.Time
}

// work is a thread a runner holds a claim on.
type work struct {
	thread  string
	p       int
	claim   events.Claim
	pending []uint64 // messages it knows pending, oldest first
	// abandon is a run left active by an older claim, to abandon first.
	abandon         string
	abandonClaimSeq uint64
	run             string // its own active run, "" when none
	lastRun         uint64 // the run subject's last sequence it knows
	drain           bool
}

func (w *world) join() {
	w.nextID++
	name := fmt.Sprintf("r%d", w.nextID)
	h := w.log.Open(memstore.Config{Now: w.clock.Now, Subjects: w.subj, Fault: w.leaseFault})
	r := &runner{name: name, leases: h, store: h, core: owner.New(owner.Config{Partitions: w.cfg.Partitions, TTL: TTL}),
		threads: map[string]*work{}, perPart: map[int]int{}, queued: map[string]bool{}, draining: map[int]bool{}}
	if w.cfg.Unfenced {
		r.store = eventstest.Unfenced(h)
	}
	w.runners = append(w.runners, r)
	w.tracef("%s joins", name)
	w.openSession(r)
}

// leaseFault fails a lease write now and then while the faults last.
func (w *world) leaseFault(op, _ string) memstore.Fault {
	if w.noFaults || op != "lease" || w.rng.IntN(100) >= 2 {
		return memstore.NoFault
	}
	return memstore.FailBefore
}

func (w *world) openSession(r *runner) {
	for {
		s, err := r.store.OpenSession(w.ctx, r.name, TTL)
		if err == nil {
			r.sess, r.renewAt = s, w.now().Add(TTL/3)
			w.tracef("%s opens session %s", r.name, s.ID)
			w.coreStep(r, owner.SessionOpened{ID: s.ID})
			return
		}
	}
}

func (w *world) leave(r *runner) {
	w.tracef("%s leaves", r.name)
	r.leaving = true
	w.coreStep(r, owner.Leave{})
}

func (w *world) freeze(r *runner) {
	w.tracef("%s freezes", r.name)
	r.state = frozen_
}

func (w *world) thaw(r *runner) {
	w.tracef("%s thaws", r.name)
	r.state = alive
}

// runnerActions adds what an alive runner may do next.
func (w *world) runnerActions(r *runner, add func(int, func())) {
	if !r.renewAt.After(w.now()) {
		add(30, func() { w.keepSession(r) })
	}
	if len(r.inbox) > 0 {
		add(8, func() { w.deliver(r) })
	}
	if !r.wake.IsZero() && !r.wake.After(w.now()) {
		add(8, func() { w.coreStep(r, owner.Tick{}) })
	}
	if len(r.queue) > 0 {
		add(6, func() { w.claimNext(r) })
	}
	if len(r.order) > 0 {
		add(10, func() { w.work(r, r.threads[r.order[w.rng.IntN(len(r.order))]]) })
	}
	if slices.ContainsFunc(r.rechecks, func(rc recheck) bool { return !rc.at.After(w.now()) }) {
		add(3, func() { w.rechecked(r) })
	}
}

// keepSession renews r's session; a lost one (it lapsed while r was
// frozen) loses every claim under it, and r opens a new one.
func (w *world) keepSession(r *runner) {
	s, err := r.store.RenewSession(w.ctx, r.sess)
	switch {
	case err == nil:
		r.sess, r.renewAt = s, w.now().Add(TTL/3)
	case errors.Is(err, events.ErrLeaseLost):
		w.tracef("%s lost session %s", r.name, r.sess.ID)
		for _, th := range slices.Clone(r.order) {
			w.drop(r, th)
		}
		r.queue, r.queued = nil, map[string]bool{}
		w.coreStep(r, owner.SessionLost{})
		w.openSession(r)
	}
}

// deliver feeds r's core its next input.
func (w *world) deliver(r *runner) {
	ev := r.inbox[0]
	r.inbox = r.inbox[1:]
	w.coreStep(r, ev)
}

// coreStep steps r's core and carries out its Ready: the lease calls at
// once, their reports into the inbox for a later step.
func (w *world) coreStep(r *runner, ev owner.Event) {
	lapsed := r.core.Stats().Lapsed
	rd := r.core.Step(owner.Input{Now: w.now(), Event: ev})
	if n := r.core.Stats().Lapsed - lapsed; n > 0 {
		w.tracef("%s: %d partition leases lapsed unrenewed (on %T, wake was %s)", r.name, n, ev, r.wake.Sub(eventstest.Epoch))
	}
	r.wake = rd.Wake
	if rd.Read {
		ls, err := r.leases.PartitionLeases(w.ctx, w.cfg.Partitions)
		r.inbox = append(r.inbox, owner.Leases{Leases: ls, Err: err})
	}
	for _, p := range rd.Acquire {
		l, err := r.leases.AcquirePartition(w.ctx, p, r.sess.ID, r.name, TTL)
		if err == nil {
			w.res.Figures.Acquired++
			w.tracef("%s acquires partition %d", r.name, p)
		}
		r.inbox = append(r.inbox, owner.Acquired{Partition: p, Lease: l, Err: err})
	}
	for _, l := range rd.Renew {
		nl, err := r.leases.RenewPartition(w.ctx, l)
		r.inbox = append(r.inbox, owner.Renewed{Partition: l.Partition, Lease: nl, Err: err})
	}
	for _, l := range rd.Release {
		w.tracef("%s releases partition %d", r.name, l.Partition)
		r.inbox = append(r.inbox, owner.Released{Partition: l.Partition, Err: r.leases.ReleasePartition(w.ctx, l)})
	}
	for _, p := range rd.Follow {
		w.follow(r, p)
	}
	for _, p := range rd.Drain {
		w.tracef("%s drains partition %d", r.name, p)
		r.draining[p] = true
		for _, th := range r.order {
			if wk := r.threads[th]; wk.p == p {
				wk.drain = true
			}
		}
	}
	w.maybeDrained(r)
	if rd.Done && r.leaving {
		if err := r.store.CloseSession(w.ctx, r.sess); err != nil && !errors.Is(err, events.ErrLeaseLost) {
			w.tracef("%s: close session: %v", r.name, err)
		}
		r.state = gone
		w.tracef("%s is gone", r.name)
	}
}

// follow starts following partition p: its stream, replayed, names the
// threads with work (the checker's folds are that replay).
func (w *world) follow(r *runner, p int) {
	for _, th := range w.byPart[p] {
		if _, ok := w.unsettled[th]; ok {
			w.enqueue(r, th)
		}
	}
}

func (w *world) enqueue(r *runner, th string) {
	if r.queued[th] || r.threads[th] != nil {
		return
	}
	r.queued[th] = true
	r.queue = append(r.queue, th)
}

// maybeDrained reports the partitions r drained that hold no thread any
// more.
func (w *world) maybeDrained(r *runner) {
	for _, p := range sortedKeys(r.draining) {
		if r.perPart[p] == 0 {
			delete(r.draining, p)
			r.inbox = append(r.inbox, owner.Drained{Partition: p})
		}
	}
}

// routed hands a post of thread th to r, which follows its partition.
func (w *world) routed(r *runner, th string, seq uint64) {
	if wk := r.threads[th]; wk != nil {
		if !slices.Contains(wk.pending, seq) {
			wk.pending = append(wk.pending, seq)
		}
		return
	}
	if r.core.Claims(events.Partition(th, w.cfg.Partitions)) {
		w.enqueue(r, th)
	}
}

// claimNext claims the next queued thread, if r still owns its partition.
func (w *world) claimNext(r *runner) {
	th := r.queue[0]
	r.queue = r.queue[1:]
	delete(r.queued, th)
	p := events.Partition(th, w.cfg.Partitions)
	if !r.core.Claims(p) || r.threads[th] != nil {
		return
	}
	r.holders++
	holder := fmt.Sprintf("%s/%d", r.name, r.holders)
	c, err := events.AcquireSessionMarker(w.ctx, r.store, r.sess, th, holder, w.now())
	if err != nil {
		// Busy (another holds it, and sees its posts) or failed half way:
		// look again later while r owns the partition.
		r.rechecks = append(r.rechecks, recheck{thread: th, at: w.now().Add(TTL)})
		return
	}
	// Load up to the marker (DESIGN §3 step 4): the checker's fold is the
	// log up to this step, which holds every write before the marker.
	f := w.folds[th]
	wk := &work{thread: th, p: p, claim: c, lastRun: f.LastRunSubjectSeq}
	if w.subj.RunFence {
		// The marker is on the run subject, its last when it lands
		// (the fold has everything before it): K starts at claim_seq.
		wk.lastRun = c.Seq
	}
	for _, m := range f.Pending() {
		wk.pending = append(wk.pending, m.Seq)
	}
	if f.ActiveRun != nil {
		wk.abandon, wk.abandonClaimSeq = f.ActiveRun.ID, f.ActiveRun.ClaimSeq
	}
	if r.draining[p] {
		wk.drain = true
	}
	r.threads[th] = wk
	r.order = append(r.order, th)
	r.perPart[p]++
}

// drop forgets a thread r holds no claim on any more.
func (w *world) drop(r *runner, th string) {
	wk := r.threads[th]
	if wk == nil {
		return
	}
	delete(r.threads, th)
	i := slices.Index(r.order, th)
	r.order[i] = r.order[len(r.order)-1]
	r.order = r.order[:len(r.order)-1]
	r.perPart[wk.p]--
	w.maybeDrained(r)
}

// work makes the next write of a thread r holds.
func (w *world) work(r *runner, wk *work) {
	now := w.now()
	var err error
	switch {
	case wk.abandon != "":
		var ack events.Ack
		ack, err = r.store.Append(w.ctx, events.NewRunAbandoned(wk.claim, now, wk.abandon, wk.abandonClaimSeq, "taken over"), w.fence(wk))
		if err == nil {
			wk.abandon, wk.lastRun = "", ack.Seq
		}
	case wk.run != "":
		var ack events.Ack
		ack, err = r.store.Append(w.ctx, events.NewRunCompleted(wk.claim, now, wk.run, "done"), events.ExpectLast(wk.lastRun))
		if err == nil {
			wk.run, wk.lastRun = "", ack.Seq
		}
	case len(wk.pending) > 0 && !wk.drain && r.core.Claims(wk.p):
		shared := w.sharedWith(r, wk.p)
		defer func() {
			if shared {
				w.res.Figures.Shared++
				if err != nil {
					w.res.Figures.SharedRefused++
				}
			}
		}()
		r.holders++
		run := fmt.Sprintf("%s-run%d", r.name, r.holders)
		var ack events.Ack
		ack, err = r.store.Append(w.ctx, events.NewRunStarted(wk.claim, now, run, wk.pending[0], "sim"), w.fence(wk))
		if err == nil {
			wk.pending, wk.run, wk.lastRun = wk.pending[1:], run, ack.Seq
		}
	default:
		// Idle, or handing the partition over: give the claim up. Its
		// pending messages, if any, are the next owner's.
		if err := events.ReleaseClaimAt(w.ctx, r.store, wk.claim, wk.lastRun, "idle", now); err != nil {
			w.fail(CheckStore, fmt.Sprintf("%s: release %s: %v", r.name, wk.thread, err))
		}
		w.drop(r, wk.thread)
		return
	}
	switch {
	case errors.Is(err, events.ErrThreadBusy), errors.Is(err, events.ErrConflict):
		// Fenced out: a newer claim holds the thread.
		w.res.Figures.Fenced++
		w.tracef("%s fenced out of %s", r.name, wk.thread)
		w.drop(r, wk.thread)
	case err != nil:
		w.fail(CheckStore, fmt.Sprintf("%s: append to %s: %v", r.name, wk.thread, err))
	}
}

// fence is a consuming write's check: the claim subject's fence, or under
// RUNFENCE a compare-and-set on the run subject's last sequence as wk
// knows it (an unguarded events.Fenced is refused there).
func (w *world) fence(wk *work) events.Check {
	if w.subj.RunFence {
		return events.FencedGuarded(wk.claim, wk.lastRun)
	}
	return events.Fenced(wk.claim)
}

// sharedWith reports whether another live runner believes it owns p too.
func (w *world) sharedWith(r *runner, p int) bool {
	for _, o := range w.runners {
		if o != r && o.state == alive && o.core.Claims(p) {
			return true
		}
	}
	return false
}

// rechecked queues again the threads whose recheck is due.
func (w *world) rechecked(r *runner) {
	keep := r.rechecks[:0]
	for _, rc := range r.rechecks {
		if rc.at.After(w.now()) {
			keep = append(keep, rc)
			continue
		}
		if _, ok := w.unsettled[rc.thread]; ok && r.core.Claims(events.Partition(rc.thread, w.cfg.Partitions)) {
			w.enqueue(r, rc.thread)
		}
	}
	r.rechecks = keep
}

func sortedKeys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
