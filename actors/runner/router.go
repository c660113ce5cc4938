package runner

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/artifactr/artifactr/actors/thread"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/sys"
	"github.com/artifactr/artifactr/projections"
)

// Messages to the runner actor.
type (
	// workItem says thread may have work, and how sure that is. One from
	// the work source carries its ack.
	workItem struct {
		thread string
		want   want
		ack    func()
	}
	// peekResult says whether a peek found work.
	peekResult struct {
		thread string
		work   bool
		err    error
	}
	routed       struct{ env events.Envelope }
	leaseChanged struct{ u events.LeaseUpdate }
	// leaseWatchReset says the lease watch started again; its current
	// state follows.
	leaseWatchReset struct{}
	sessionLost     struct{ id string }
	sessionOpened   struct{ id string }
	claimResult     struct {
		thread  string
		claim   events.Claim
		view    *projections.Thread // from a snapshot and the replay's chunks, or nil
		snapSeq uint64              // the snapshot's sequence; 0 when none
		history []events.Envelope
		err     error
	}
	drainAll struct{}
	// orphanCheck looks again at a thread of a lapsed session that fell to
	// another runner.
	orphanCheck struct{ thread, dead string }
	// busyCheck looks again at a thread (see recheck).
	busyCheck struct{ thread string }
)

// want is what to do about a thread that may have work. A stronger want
// replaces a weaker one for a thread already queued.
type want uint8

const (
	// wantPeek reads the thread and claims it only if it has work: a
	// look again without evidence of work must cost no writes.
	wantPeek want = iota
	// wantProbe claims the thread and gives it up at once if it has
	// nothing to do: a lapsed session's thread, whose lease must be
	// cleared.
	wantProbe
	// wantClaim claims the thread and keeps it until it is idle: a post.
	wantClaim
)

func (w want) String() string {
	return [...]string{"peek", "probe", "claim"}[w]
}

// orphanRecheck, in claim TTLs, is how long a runner waits before it claims
// a lapsed session's thread that fell to another runner and is still under
// the lapsed session.
const orphanRecheck = 2

// handoverDelay is how long a thread whose actor panicked waits before it is
// claimed again, so a panic that repeats does not spin.
const handoverDelay = time.Second

// claimRetryDelay is how long a claim that failed with an error other than
// busy waits before it is tried again; it doubles with each failure in a
// row.
const claimRetryDelay = 250 * time.Millisecond

// jitter spreads d over [d/2, d) so that retries do not come in waves.
func jitter(d time.Duration) time.Duration {
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// child is a thread actor as the runner actor knows it.
type child struct {
	pid      *actor.PID
	claim    events.Claim
	fate     *childFate
	lastPost uint64 // the newest post routed to it
}

// childFate is what a thread actor tells the runner actor about its end. It
// is shared rather than sent because Terminated, a system message, may
// overtake any message the child sent before it stopped.
type childFate struct {
	clean    atomic.Bool   // the core chose to stop: released, or fenced out
	rework   atomic.Bool   // work arrived as it released: claim again
	released atomic.Bool   // its release was stored
	checked  atomic.Uint64 // posts up to this one were seen by the release
}

// claiming is a claim in flight, with the events the follow routed for its
// thread meanwhile: the claim's load may have been made before them.
type claiming struct {
	want want
	envs []events.Envelope
	// acks is how many of the thread's parked wake-ups came before the
	// claim or peek started: their posts were stored before its marker
	// (or its read), so it reads them. Wake-ups that came later may be for
	// posts it never read, and stay parked.
	acks int
	// then is work asked for while a peek was in flight, to be done after
	// it; thenSet says there is some.
	then    want
	thenSet bool
}

// runnerActor routes events and work to thread actors. It holds no business
// logic, as a panic in it would stop every thread actor. It owns all of the
// runner's routing state; only it reads or writes these fields.
type runnerActor struct {
	r        *Runner
	self     *actor.PID
	children map[string]*child
	claiming map[string]*claiming
	queue    []workItem      // waiting for a claim slot or a session
	queued   map[string]want // threads in queue, and what for
	failures map[string]int  // claims in a row that failed, by thread
	rechecks map[string]bool // threads with a busyCheck pending
	// acks are the work source's wake-ups for threads not yet held, to
	// acknowledge once a claim holds them.
	acks map[string][]func()
	// skipped are the threads whose posts this runner left to another
	// live runner's claim. Their release makes this runner read them once,
	// later: the holder may have died between its release and the claim
	// again it would make for a post that came as it released.
	skipped  map[string]struct{}
	draining bool
	session  string // the session claims are made under; "" while lost

	// What the lease watch says: the session each leased thread lives by,
	// and the sessions whose keys are present.
	leases   map[string]string
	sessions map[string]bool
	caughtUp bool

	// props spawns every thread actor: Props per actor cost a few hundred
	// bytes per held thread. Its producer returns spawning, which the
	// spawn, synchronous in Receive, asks for once.
	props    *actor.Props
	spawning *threadActor
}

// threadProps returns the Props that spawn thread actors.
func (ra *runnerActor) threadProps() *actor.Props {
	if ra.props == nil {
		ra.props = actor.PropsFromProducer(func() actor.Actor {
			if a := ra.spawning; a != nil {
				ra.spawning = nil
				return a
			}
			// Asked for outside a spawn: a restart, which the supervisor
			// never orders (a panicked thread actor is stopped). Stop.
			return stopAtStart{}
		}, actor.WithDispatcher(ra.r.disp))
	}
	return ra.props
}

// stopAtStart is an actor that stops as it starts.
type stopAtStart struct{}

// Receive implements actor.Actor.
func (stopAtStart) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		ctx.Stop(ctx.Self())
	}
}

func newRunnerActor(r *Runner) *runnerActor {
	return &runnerActor{
		r:        r,
		children: map[string]*child{},
		claiming: map[string]*claiming{},
		queued:   map[string]want{},
		failures: map[string]int{},
		rechecks: map[string]bool{},
		skipped:  map[string]struct{}{},
		acks:     map[string][]func(){},
		session:  r.currentSession().ID,
		leases:   map[string]string{},
		sessions: map[string]bool{},
	}
}

// Receive implements actor.Actor.
func (ra *runnerActor) Receive(ctx actor.Context) {
	if ra.self == nil {
		ra.self = ctx.Self()
	}
	switch m := ctx.Message().(type) {
	case routed:
		ra.route(ctx, m.env)
	case workItem:
		if m.ack != nil {
			ra.woken(m)
		} else {
			ra.enqueue(m)
		}
		ra.pump(ctx)
	case claimResult:
		ra.claimed(ctx, m)
		ra.pump(ctx)
	case peekResult:
		ra.peeked(m)
		ra.pump(ctx)
	case *actor.Terminated:
		ra.terminated(ctx, m.Who)
		ra.pump(ctx)
	case leaseChanged:
		ra.leaseChanged(m.u)
		ra.pump(ctx)
	case leaseWatchReset:
		ra.caughtUp = false
	case busyCheck:
		delete(ra.rechecks, m.thread)
		ra.r.stats.rechecks.Add(1)
		ra.r.stats.rechecksDue.Store(int64(len(ra.rechecks)))
		s, leased := ra.leases[m.thread]
		idle := ra.children[m.thread] == nil && ra.claiming[m.thread] == nil
		switch {
		case leased && s != ra.session && ra.sessions[s]:
			// Another live runner holds it: watch for its release.
			ra.skipped[m.thread] = struct{}{}
		case !leased:
			// Nobody holds it: claim it if it has work.
			ra.enqueue(workItem{thread: m.thread, want: wantPeek})
			ra.pump(ctx)
		case idle && s == ra.session:
			// This runner's session holds it with no claim on it (a
			// claim that failed after taking the lease, which it keeps
			// for the retry): claim it, which clears the lease if it has
			// nothing to do.
			ra.enqueue(workItem{thread: m.thread, want: wantProbe})
			ra.pump(ctx)
		}
	case orphanCheck:
		// Still under the lapsed session: the runner it fell to did not
		// take it. Claim it.
		if ra.leases[m.thread] == m.dead {
			ra.enqueue(workItem{thread: m.thread, want: wantProbe})
			ra.pump(ctx)
		}
	case sessionLost:
		ra.session = ""
		for _, c := range ra.children {
			if c.claim.Lease.Session == m.id {
				ctx.Send(c.pid, sessionGone{})
			}
		}
	case sessionOpened:
		ra.session = m.id
		ra.pump(ctx)
	case drainAll:
		ra.draining = true
		ra.queue, ra.queued = nil, map[string]want{}
		ra.acks = map[string][]func(){} // unacknowledged: they go to another runner
		for _, c := range ra.children {
			ctx.Send(c.pid, drainReq{})
		}
		ra.maybeDone()
	case debugReq:
		ra.describe(m)
	case *actor.Stopped:
		close(ra.r.actorStopped)
	}
}

// route hands an event of the stream to its thread's actor, or keeps it for
// a claim in flight. A post to a thread no live runner holds is work for the
// runner it falls to by hash (see owns); the others look again after a while,
// so a post is not lost if that runner is gone.
func (ra *runnerActor) route(ctx actor.Context, env events.Envelope) {
	if c := ra.children[env.Thread]; c != nil {
		if env.Kind == events.KindPosted {
			c.lastPost = env.Seq
		}
		ctx.Send(c.pid, thread.Observed{Env: env})
		return
	}
	if cl := ra.claiming[env.Thread]; cl != nil {
		cl.envs = append(cl.envs, env)
		return
	}
	if env.Type != events.TypeMessagePosted || env.Thread == "" {
		return // a fork's copied history is no work
	}
	th := env.Thread
	s, leased := ra.leases[th]
	if leased && s != ra.session && ra.sessions[s] {
		// A live runner holds it and sees the post on its own follow.
		// Should its claim be released without it taking the post (it
		// died in between), the release says so (leaseChanged).
		ra.skipped[th] = struct{}{}
		return
	}
	if ra.r.cfg.Work != nil && !(leased && s == ra.session) {
		return // the work source hands the post to one runner
	}
	if (leased && s == ra.session) || ra.owns(th) {
		// This session's lease with no claim here (a release the watch
		// has not reported yet), or a free thread that falls to this
		// runner: one runner claims it, rather than all racing.
		ra.enqueue(workItem{thread: th, want: wantClaim})
		ra.pump(ctx)
	} else {
		// It falls to another runner: look again later, in case that one
		// died before it claimed.
		ra.recheck(th)
	}
}

// woken takes a wake-up from the work source. It is acknowledged only once
// this runner has seen the post taken care of: a claim of its own made
// after it (which loads it), or a read after the thread's holder let go
// that finds nothing left to do. Until then it is parked: should this
// runner die, the source hands the post to another. A thread held here or
// by another live runner is read when that claim ends (terminated,
// leaseChanged), since its holder may have released it and died before it
// claimed again for the post.
func (ra *runnerActor) woken(w workItem) {
	if ra.draining {
		return // not acknowledged: another runner gets it
	}
	th := w.thread
	ra.acks[th] = append(ra.acks[th], w.ack)
	s, leased := ra.leases[th]
	if ra.children[th] != nil || (leased && s != ra.session && ra.sessions[s]) {
		return // parked until that claim ends
	}
	ra.enqueue(workItem{thread: th, want: wantClaim})
}

// Wake has the runner look at thread: read it and claim it if it has work
// (a message pending, or a run to abandon), as for a look again. A detector
// of stranded threads calls it (serve's thread-summaries projector). It
// returns at once; call it after Start. An invalid thread id is ignored.
func (r *Runner) Wake(thread string) {
	if events.ValidateThreadID(thread) != nil || r.draining() {
		return
	}
	r.send(workItem{thread: thread, want: wantPeek})
}

// lookAfterHolder reads th, whose holder let go, if wake-ups for it are
// parked here.
func (ra *runnerActor) lookAfterHolder(th string) {
	if len(ra.acks[th]) > 0 && ra.children[th] == nil && !ra.draining {
		ra.enqueue(workItem{thread: th, want: wantPeek})
	}
}

// ackRead acknowledges th's wake-ups that came before cl started: a claim
// that read their posts holds the thread, or a read after its holder let go
// found nothing left to do. Later ones stay parked: their posts may have
// landed after cl's read, and if its holder releases the thread without
// them and dies before it claims again, only their redelivery brings the
// thread back (issue 21).
func (ra *runnerActor) ackRead(th string, cl *claiming) {
	acks := ra.acks[th]
	n := 0
	if cl != nil {
		n = min(cl.acks, len(acks))
	}
	if kept := len(acks) - n; kept > 0 {
		ra.r.stats.keptParked.Add(int64(kept))
	}
	if n == 0 {
		return
	}
	if n == len(acks) {
		delete(ra.acks, th)
	} else {
		ra.acks[th] = slices.Clone(acks[n:])
	}
	ra.ack(acks[:n:n])
}

// ack acknowledges off the actor's goroutine: an ack is a network write.
func (ra *runnerActor) ack(acks []func()) {
	ra.r.goDo(func() {
		for _, a := range acks {
			a()
		}
	})
}

func (ra *runnerActor) enqueue(w workItem) {
	if cl := ra.claiming[w.thread]; cl != nil && cl.want == wantPeek && !ra.draining {
		// A peek answers only whether it read work; this must not be lost.
		if !cl.thenSet || w.want > cl.then {
			cl.then, cl.thenSet = w.want, true
		}
		return
	}
	if ra.draining || ra.children[w.thread] != nil || ra.claiming[w.thread] != nil {
		return
	}
	if q, ok := ra.queued[w.thread]; ok {
		ra.queued[w.thread] = max(q, w.want)
		return
	}
	ra.queued[w.thread] = w.want
	ra.queue = append(ra.queue, w)
}

// pump starts claims from the queue while slots are free.
func (ra *runnerActor) pump(ctx actor.Context) {
	r := ra.r
	for len(ra.queue) > 0 && len(ra.claiming) < r.cfg.MaxClaiming && ra.session != "" && !ra.draining {
		w := ra.queue[0]
		ra.queue[0] = workItem{}
		ra.queue = ra.queue[1:]
		wt, ok := ra.queued[w.thread]
		delete(ra.queued, w.thread)
		if !ok || ra.children[w.thread] != nil || ra.claiming[w.thread] != nil {
			continue
		}
		ra.claiming[w.thread] = &claiming{want: wt, acks: len(ra.acks[w.thread])}
		self := ctx.Self()
		th := w.thread
		if wt == wantPeek {
			r.goDo(func() {
				cctx, cancel := context.WithTimeout(r.ctx, r.cfg.CallTimeout)
				defer cancel()
				work, err := r.peek(cctx, th)
				r.sys.Root.Send(self, peekResult{thread: th, work: work, err: err})
			})
			continue
		}
		holder := r.cfg.ID + "/" + randHex(6)
		sess := r.currentSession()
		r.goDo(func() {
			cctx, cancel := context.WithTimeout(r.ctx, r.cfg.CallTimeout)
			defer cancel()
			res := r.claim(cctx, sess, th, holder)
			r.sys.Root.Send(self, res)
		})
	}
	if len(ra.queue) == 0 && cap(ra.queue) > 1024 {
		ra.queue = nil // let a drained burst's backing array go
	}
}

// claim claims th under sess, starting from the thread's snapshot when the
// store keeps them and it verifies. It runs off the actor's goroutine.
func (r *Runner) claim(ctx context.Context, sess events.Session, th, holder string) claimResult {
	c, err := events.AcquireSessionMarker(ctx, r.store, sess, th, holder, r.now())
	if err != nil {
		return claimResult{thread: th, err: err}
	}
	// A snapshot is saved when a claim ends: a thread claimed for the first
	// time has none, and its claim costs no read for one.
	var view *projections.Thread
	if c.Prev != 0 {
		view = r.loadSnapshot(ctx, th)
	}
	var from, snapSeq uint64
	if view != nil && view.LastSeq >= c.Seq {
		// A snapshot at or past the new marker cannot be of this log.
		r.stats.snapshotsBad.Add(1)
		r.log.Warn("snapshot ignored: past the claim's marker", "thread", th, "snapshot_seq", view.LastSeq, "claim_seq", c.Seq)
		view = nil
	}
	if view != nil {
		from, snapSeq = view.LastSeq+1, view.LastSeq
	}
	view, from, err = r.replayChunks(c, view, from)
	if err != nil {
		return claimResult{thread: th, err: err}
	}
	// Each read of the replay has a call's time of its own: a long log
	// takes more than one, and a claim that always timed out would never
	// end.
	lctx, cancel := context.WithTimeout(r.ctx, r.cfg.CallTimeout)
	defer cancel()
	h, err := events.LoadClaimed(lctx, r.store, c, from)
	if err == nil && view == nil {
		// A fork by reference: its runs' history is its source's.
		err = projections.ResolveFirst(lctx, r.store, h)
	}
	return claimResult{thread: th, claim: c, view: view, snapSeq: snapSeq, history: h, err: err}
}

// replayChunk is how many sequences of the log one read of a claim's
// replay covers at most.
var replayChunk uint64 = 16 << 10 // a var for tests (export_test.go)

// replayChunks folds the thread's log from from into view (a fresh one
// when nil), one bounded read at a time, up to the last chunk before the
// claim's marker, and returns the view and where the rest starts. A claim
// with no snapshot of a long thread then holds one compact view and one
// chunk, not the whole log, and each read ends within the store's call
// timeout. A store that cannot read a bounded range replays it at once.
func (r *Runner) replayChunks(c events.Claim, view *projections.Thread, from uint64) (*projections.Thread, uint64, error) {
	if _, ok := r.store.(events.BoundedLoader); !ok {
		return view, from, nil
	}
	from = max(from, 1)
	for from+replayChunk <= c.Seq {
		if err := r.replayChunk(c, &view, from); err != nil {
			return nil, 0, err
		}
		from += replayChunk
	}
	return view, from, nil
}

// replayChunk folds one bounded read of the log, from from on, into *view,
// making the view at the thread's first event: a fork by reference starts
// from its source's history.
func (r *Runner) replayChunk(c events.Claim, view **projections.Thread, from uint64) error {
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.CallTimeout)
	defer cancel()
	envs, err := r.store.(events.BoundedLoader).LoadUpTo(ctx, c.Thread, from, from+replayChunk-1)
	if err == nil && *view == nil && len(envs) > 0 {
		err = projections.ResolveFirst(ctx, r.store, envs)
		*view = projections.New(c.Thread)
	}
	if err != nil {
		return fmt.Errorf("runner: replay %s from %d: %w", c.Thread, from, err)
	}
	for _, env := range envs {
		(*view).Apply(env)
	}
	if *view != nil {
		(*view).Compact()
	}
	return nil
}

// peek reports whether th has work: a message not yet taken, or a run a
// claim would have to abandon. It only reads. It runs off the actor's
// goroutine.
func (r *Runner) peek(ctx context.Context, th string) (bool, error) {
	view := r.loadSnapshot(ctx, th)
	from := uint64(1)
	if view != nil {
		from = view.LastSeq + 1
	} else {
		view = projections.New(th)
	}
	envs, err := r.store.Load(ctx, th, from)
	if err != nil {
		return false, err
	}
	for _, env := range envs {
		view.Apply(env)
	}
	return len(view.Pending()) > 0 || view.ActiveRun != nil, nil
}

// peeked claims a thread whose peek found work, failed, or was overtaken by
// a post.
func (ra *runnerActor) peeked(m peekResult) {
	cl := ra.claiming[m.thread]
	delete(ra.claiming, m.thread)
	ra.r.stats.peeks.Add(1)
	defer ra.maybeDone()
	if ra.r.ctx.Err() != nil {
		return
	}
	if cl != nil && slices.ContainsFunc(cl.envs, func(e events.Envelope) bool { return e.Kind == events.KindPosted }) {
		// Posted while the peek read: it may have read before the post.
		ra.enqueue(workItem{thread: m.thread, want: wantClaim})
		return
	}
	if cl != nil && cl.thenSet && cl.then > wantPeek {
		ra.enqueue(workItem{thread: m.thread, want: cl.then})
	}
	if m.err != nil || m.work {
		if m.err != nil {
			ra.r.log.Debug("peek failed; claiming", "thread", m.thread, "err", m.err)
		}
		ra.enqueue(workItem{thread: m.thread, want: wantProbe})
		return
	}
	ra.ackRead(m.thread, cl) // read after its holder let go: nothing left to do
}

// loadSnapshot returns th's fold from its snapshot, or nil when the store
// keeps none, it has none, or it does not verify (reported, never trusted).
func (r *Runner) loadSnapshot(ctx context.Context, th string) *projections.Thread {
	ss, ok := r.store.(events.SnapshotStore)
	if !ok || r.cfg.SnapshotEvery < 0 {
		return nil
	}
	data, err := ss.LoadSnapshot(ctx, th)
	if err != nil || data == nil {
		return nil
	}
	view, err := projections.DecodeSnapshot(th, data)
	if err != nil {
		r.stats.snapshotsBad.Add(1)
		r.log.Warn("snapshot ignored", "thread", th, "err", err)
		return nil
	}
	r.stats.snapshotsLoaded.Add(1)
	return view
}

func (ra *runnerActor) claimed(ctx actor.Context, m claimResult) {
	r := ra.r
	cl := ra.claiming[m.thread]
	delete(ra.claiming, m.thread)
	defer ra.maybeDone()
	if m.err != nil {
		if r.ctx.Err() != nil {
			return
		}
		if errors.Is(m.err, events.ErrThreadBusy) {
			r.stats.claimsBusy.Add(1)
			// Another holds it; the wake-ups stay parked until it lets go.
			// Another holds the lease and sees the thread's posts. Look
			// again later all the same: if nobody holds it by then (its
			// claim failed, its runner died before it retried), the work
			// this runner was woken for would wait for the next post.
			ra.recheck(m.thread)
			return
		}
		// It may have failed half way, with the lease or the marker ours:
		// try again soon, or the thread waits for this runner's end.
		ra.recheck(m.thread)
		n := ra.failures[m.thread]
		ra.failures[m.thread] = n + 1
		delay := min(claimRetryDelay<<min(n, 5), maxClaimRetry) // up to 32x: an overloaded server needs room
		r.log.Warn("claim failed; retrying", "thread", m.thread, "attempt", n+1, "in", delay, "err", m.err)
		w := workItem{thread: m.thread, want: wantOf(cl)}
		self := ctx.Self()
		r.goDo(func() {
			if sys.Sleep(r.ctx, jitter(delay)) {
				r.sys.Root.Send(self, w)
			}
		})
		return
	}
	delete(ra.failures, m.thread)
	if why := m.claim.Lease.Reclaimed; why != "" {
		r.stats.leasesReclaimed.Add(1)
		r.log.Warn("claimed a thread whose lease no live session explained", "thread", m.thread, "reason", why)
	}
	if r.ctx.Err() != nil {
		return // killed or stopped: spawn nothing the stop would wait for
	}
	if ra.draining || r.draining() || m.claim.Lease.Session != ra.session {
		// Draining, or claimed under a session lost meanwhile: leave the
		// claim as it is. Its lease lapses with the session (closed at the
		// end of a drain), and whoever claims next abandons what it must;
		// releasing here would skip that abandon. Claim it again under
		// the new session: it may have work.
		if !ra.draining && !r.draining() {
			ra.enqueue(workItem{thread: m.thread, want: wantOf(cl)})
		}
		return
	}
	history := m.history
	if cl != nil && len(cl.envs) > 0 {
		history = append(history, cl.envs...) // Core skips what it holds
	}
	fate := &childFate{}
	ra.spawning = newThreadActor(r, m.claim, m.view, m.snapSeq, history, wantOf(cl) != wantClaim, fate)
	pid, err := ctx.SpawnNamed(ra.threadProps(), actorName(m.thread, m.claim.Seq))
	ra.spawning = nil
	if err != nil {
		r.log.Error("spawn thread actor", "thread", m.thread, "err", err)
		return
	}
	ctx.Watch(pid)
	ra.children[m.thread] = &child{pid: pid, claim: m.claim, fate: fate}
	delete(ra.skipped, m.thread)
	ra.ackRead(m.thread, cl)
	r.stats.held.Add(1)
	r.stats.claims.Add(1)
}

// actorName names the actor of a claim: the thread and the claim's marker,
// never the same twice. protoactor finds a dead actor's PID again by name,
// and a stopped actor's goroutines (appends, syncs, runs) still report to
// it: under the thread's name alone they would reach the thread's next
// actor, which would take an append result for its own.
func actorName(thread string, claimSeq uint64) string {
	return thread + "#" + strconv.FormatUint(claimSeq, 10)
}

// terminated forgets a stopped thread actor and hands its thread over when
// it stopped without giving its claim up: a panic, or its session lost.
func (ra *runnerActor) terminated(ctx actor.Context, who *actor.PID) {
	r := ra.r
	th, _, _ := strings.Cut(strings.TrimPrefix(who.Id, ctx.Self().Id+"/"), "#")
	c := ra.children[th]
	if c == nil || !c.pid.Equal(who) {
		return
	}
	delete(ra.children, th)
	r.stats.held.Add(-1)
	defer ra.maybeDone()
	defer ra.lookAfterHolder(th)
	switch {
	case ra.draining || r.ctx.Err() != nil:
		// Stopped by the runner's own stop or kill.
	case c.claim.Lease.Session != ra.session:
		// Its session was lost: the lease is free; claim again if there is
		// work.
		ra.enqueue(workItem{thread: th, want: wantProbe})
	case c.fate.clean.Load():
		switch {
		case c.fate.rework.Load() || c.lastPost > c.fate.checked.Load():
			// Work arrived as it released, or a post reached it after
			// its release looked.
			ra.enqueue(workItem{thread: th, want: wantClaim})
		case !c.fate.released.Load():
			ra.recheck(th) // fenced out, or in case the lease is still this session's
		}
	default:
		r.stats.panics.Add(1)
		r.log.Error("thread actor stopped without giving its claim up; claiming the thread again", "thread", th, "claim_seq", c.claim.Seq)
		// The lease is under this runner's live session, so nobody else
		// would take the thread: claim it again (a fresh claim, a fresh
		// core), after a pause so that a panic that repeats does not spin.
		self := ctx.Self()
		r.goDo(func() {
			if sys.Sleep(r.ctx, handoverDelay) {
				r.sys.Root.Send(self, workItem{thread: th, want: wantClaim})
			}
		})
	}
}

// leaseChanged keeps the lease map and claims the threads of sessions that
// lapsed, which may have work their holder will never do.
func (ra *runnerActor) leaseChanged(u events.LeaseUpdate) {
	switch {
	case u.CaughtUp:
		ra.caughtUp = true
		for th, s := range ra.leases {
			if s != "" && !ra.sessions[s] {
				ra.orphaned(th, s)
			}
		}
	case u.Thread != "":
		if !u.Present || u.Session == "" {
			delete(ra.leases, u.Thread)
			ra.lookAfterHolder(u.Thread)
			if _, ok := ra.skipped[u.Thread]; ok && ra.children[u.Thread] == nil {
				// Released after this runner left posts to its holder,
				// which took them or died before it could: read it
				// later, once the holder has had time to claim again.
				delete(ra.skipped, u.Thread)
				ra.recheck(u.Thread)
			}
			return
		}
		ra.leases[u.Thread] = u.Session
		if u.Session == ra.session && ra.children[u.Thread] == nil && ra.claiming[u.Thread] == nil {
			ra.recheck(u.Thread) // this session's lease with no claim of it here
		}
		if ra.caughtUp && !ra.sessions[u.Session] {
			// Written under a session already gone (a claim that was late
			// for its runner's session): nobody will see that session lapse
			// again, so take it up now.
			ra.orphaned(u.Thread, u.Session)
		}
	case u.Present:
		ra.sessions[u.Session] = true
		ra.r.stats.liveSessions.Store(int64(len(ra.sessions)))
	default:
		delete(ra.sessions, u.Session)
		ra.r.stats.liveSessions.Store(int64(len(ra.sessions)))
		if !ra.caughtUp {
			return
		}
		// A session lapsed or closed: its threads are free. One scan of
		// the map on a rare event, rather than an index kept on every
		// claim.
		for th, s := range ra.leases {
			if s == u.Session {
				ra.orphaned(th, s)
			}
		}
	}
}

// orphaned takes up thread th, whose lease lives by the lapsed session
// dead. The live sessions split such threads between them by hash, so that
// each is claimed by one runner rather than raced for by all; the others
// look again after a while, in case the one it fell to is gone too.
func (ra *runnerActor) orphaned(th, dead string) {
	if ra.owns(th) {
		ra.enqueue(workItem{thread: th, want: wantProbe})
		return
	}
	r := ra.r
	self := ra.self
	r.goDo(func() {
		if sys.Sleep(r.ctx, jitter(orphanRecheck*r.cfg.ClaimTTL)) {
			r.sys.Root.Send(self, orphanCheck{thread: th, dead: dead})
		}
	})
}

// recheck looks at th again after two claim TTLs (see busyCheck), once
// however many reasons to look came meanwhile: a claim that found it busy or
// failed, a claim that ended, a lease of this session with no claim here.
func (ra *runnerActor) recheck(th string) {
	if ra.rechecks[th] {
		return
	}
	ra.rechecks[th] = true
	ra.r.stats.rechecksDue.Store(int64(len(ra.rechecks)))
	r, self := ra.r, ra.self
	r.goDo(func() {
		if sys.Sleep(r.ctx, jitter(orphanRecheck*r.cfg.ClaimTTL)) {
			r.sys.Root.Send(self, busyCheck{thread: th})
		}
	})
}

// owns reports whether this runner's session is the one a free thread, or
// an orphaned lease, falls to: the live session at th's hash among them, in
// id order. While this runner has no session, everything falls to it, to be
// claimed once it has one.
func (ra *runnerActor) owns(th string) bool {
	if ra.session == "" {
		return true
	}
	live := make([]string, 0, len(ra.sessions)+1)
	for s := range ra.sessions {
		live = append(live, s)
	}
	if !ra.sessions[ra.session] {
		live = append(live, ra.session)
	}
	slices.Sort(live)
	h := fnv.New32a()
	h.Write([]byte(th))
	return live[int(h.Sum32())%len(live)] == ra.session
}

// wantOf is what a claim in flight was for; a claim the runner no longer
// tracks keeps the thread only if it has work.
func wantOf(cl *claiming) want {
	if cl == nil {
		return wantProbe
	}
	return cl.want
}

func (ra *runnerActor) maybeDone() {
	if ra.draining && len(ra.children) == 0 && len(ra.claiming) == 0 {
		select {
		case <-ra.r.done:
		default:
			close(ra.r.done)
		}
	}
}

// debugReq asks the runner actor where threads stand, for diagnostics.
type debugReq struct {
	threads []string
	reply   chan map[string]string
}

// Describe returns, for each of threads, what this runner knows of it:
// whether it is queued for a claim, being claimed or held, and the session
// its lease lives by as the lease watch last said. It is for diagnostics.
func (r *Runner) Describe(ctx context.Context, threads []string) map[string]string {
	req := debugReq{threads: threads, reply: make(chan map[string]string, 1)}
	r.send(req)
	select {
	case m := <-req.reply:
		return m
	case <-ctx.Done():
		return nil
	}
}

func (ra *runnerActor) describe(m debugReq) {
	out := make(map[string]string, len(m.threads))
	for _, th := range m.threads {
		var parts []string
		if wt, ok := ra.queued[th]; ok {
			parts = append(parts, fmt.Sprintf("queued(%v)", wt))
		}
		if cl := ra.claiming[th]; cl != nil {
			parts = append(parts, fmt.Sprintf("claiming(%v)", cl.want))
		}
		if c := ra.children[th]; c != nil {
			parts = append(parts, fmt.Sprintf("held(claim=%d session=%s)", c.claim.Seq, c.claim.Lease.Session))
		}
		if s, ok := ra.leases[th]; ok {
			parts = append(parts, fmt.Sprintf("lease(session=%s live=%v)", s, ra.sessions[s]))
		}
		if ra.rechecks[th] {
			parts = append(parts, "recheck-due")
		}
		if _, ok := ra.skipped[th]; ok {
			parts = append(parts, "skipped")
		}
		if n := ra.failures[th]; n > 0 {
			parts = append(parts, fmt.Sprintf("failures=%d", n))
		}
		if n := len(ra.acks[th]); n > 0 {
			parts = append(parts, fmt.Sprintf("parked=%d", n))
		}
		out[th] = fmt.Sprintf("session=%s queue=%d claiming=%d rechecks=%d caughtUp=%v followed=%d: %s", ra.session, len(ra.queue), len(ra.claiming), len(ra.rechecks), ra.caughtUp, ra.r.Followed(), strings.Join(parts, " "))
	}
	m.reply <- out
}

// maxClaimRetry is the longest pause before a failed claim is tried again
// (see claimed).
const maxClaimRetry = claimRetryDelay << 5

// ConsumeBound is the runners' promise: once faults stop (every runner up,
// clocks true, the store reachable), a thread free to take its oldest
// message (posted, and the thread's previous run ended) has it taken within
// ConsumeBound, by a claim that read it. It is for runners with session TTL
// claimTTL sharing a work queue whose unacknowledged wake-ups come back
// after ackWait. The terms are the longest ways back to a thread:
//
//   - ackWait: a wake-up left with a runner that died before a claim read
//     its post is handed to another;
//   - claimTTL: a dead runner's session lapses, freeing its threads;
//   - 2 claimTTLs: a runner a lapsed session's thread did not fall to,
//     or one that found the thread busy, looks at it again (busyCheck,
//     orphanCheck);
//   - 8s: a claim that failed on the store is tried again.
//
// The chaos and simulation tests hold the runners to it, and the
// thread-summaries projector reports a thread that waits longer with a
// pending message and no claim as stranded.
func ConsumeBound(claimTTL, ackWait time.Duration) time.Duration {
	return ackWait + (1+orphanRecheck)*claimTTL + maxClaimRetry
}
