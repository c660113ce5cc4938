package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner/sched"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/sys"
)

// WorkSource yields threads that may have work: new posts, each to one of
// the runners sharing the source, and kept for it until acknowledged.
type WorkSource interface {
	// Next blocks until a thread may have work. It returns the thread and
	// the function that acknowledges the wake-up; one never acknowledged
	// goes to another runner after a while.
	Next(ctx context.Context) (thread string, ack func(), err error)
	// Stop ends the source.
	Stop()
}

// WorkReleaser is a [WorkSource] that can hand back every wake-up it gave
// this runner that was not acknowledged. A runner's Stop calls it after its
// drain (its claims given up, its session closed), so that the threads it
// was woken for go to the other runners soon (natsstore: in 6 s), not after
// the source's redelivery delay (30 s). Kill does not: a crash cannot.
type WorkReleaser interface {
	WorkSource
	// Release ends the source, as Stop does, and hands back what was not
	// acknowledged.
	Release()
}

// Config configures a [Runner].
type Config struct {
	// Store is the event log. Required.
	Store events.Store
	// Agent executes turns. Default: agent.Echo{}.
	Agent agent.Agent
	// ID names the runner in claim holders. Default: host-pid-random.
	ID string
	// ClaimTTL is the TTL of the runner's session, which every claim it
	// holds lives by; the session is renewed every ClaimTTL/3. Default 10s.
	ClaimTTL time.Duration
	// IdleTimeout releases a claim with nothing to do. Default 30s.
	IdleTimeout time.Duration
	// ShutdownGrace is how long Stop lets active runs finish before it
	// cancels them. Default 5s.
	ShutdownGrace time.Duration
	// CallTimeout bounds each storage call the runner makes. Default 10s.
	CallTimeout time.Duration
	// HistoryWindow is the most messages a run is given as its history
	// (see thread.Config.HistoryWindow): 0 means thread.DefaultHistoryWindow,
	// negative the whole thread.
	HistoryWindow int
	// SnapshotEvery is how many events a thread's view must have moved
	// past the snapshot its claim started from for its release to save a
	// new one, when the store keeps snapshots. Default 32; negative turns
	// snapshots off.
	SnapshotEvery int
	// MaxClaiming bounds the claims in flight at once; more wait. Default
	// 64.
	MaxClaiming int
	// Work yields threads with new posts, shared by the runners (natsstore's
	// WorkQueue). The runner acknowledges a post once a claim that read it
	// holds its thread, or a read after its holder let go found nothing to
	// do, so a post is not lost to a runner that dies first, nor when it
	// was made while no runner ran.
	// Default: none; the runner's follow finds posts instead (one runner
	// each, by hash, the others looking again later), which suits runners
	// that do not all restart at once.
	Work WorkSource
	// Logger logs. Default slog.Default().
	Logger *slog.Logger
	// Now is the runner's clock, for event times only. Default time.Now.
	Now func() time.Time
	// BeforeAppend is a fault-injection point, for tests only; leave it nil
	// in production. If set, it is called before each append a thread actor
	// makes, off the actor's goroutine, with the event about to be written:
	// the chaos and metrics tests block in it to stall a write past the
	// claim's TTL. It cannot weaken the fence (the append that follows still
	// carries its check); a hook that blocks only delays that thread's
	// writes, and it should return once ctx is done.
	BeforeAppend func(ctx context.Context, ev *eventspb.Event)
	// Observer is told what the runner does. Default: NopObserver.
	Observer Observer
}

func (c *Config) setDefaults() error {
	if c.Store == nil {
		return errors.New("runner: Config.Store is required")
	}
	if c.Agent == nil {
		c.Agent = agent.Echo{}
	}
	if c.ID == "" {
		c.ID = sys.ProcessID()
	}
	if c.ClaimTTL == 0 {
		c.ClaimTTL = 10 * time.Second
	}
	if c.ClaimTTL < 0 {
		return fmt.Errorf("runner: negative ClaimTTL %s", c.ClaimTTL)
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 30 * time.Second
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 5 * time.Second
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 10 * time.Second
	}
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = 32
	}
	if c.MaxClaiming <= 0 {
		c.MaxClaiming = 64
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Observer == nil {
		c.Observer = NopObserver{}
	}
	return nil
}

// Stats counts what a runner did.
type Stats struct {
	Claims    int64 // claims acquired
	Abandoned int64 // runs of older claims abandoned on takeover
	Fenced    int64 // claims stopped by a refused fenced write or a newer claim
	Completed int64 // runs completed
	Failed    int64 // runs failed
	Held      int64 // claims held now
	Panics    int64 // thread actors stopped by a panic
	Sessions  int64 // sessions opened

	ClaimsBusy   int64 // claims refused because another held the thread
	Rechecks     int64 // looks again at a thread after a while (see busyCheck)
	RechecksDue  int64 // looks again waiting for their time
	Peeks        int64 // reads of a thread to see whether it has work
	LiveSessions int64 // live sessions the lease watch knows of, this one included
	// KeptParked counts wake-ups that came while a claim or read of their
	// thread was in flight and stayed parked past it: their posts may have
	// landed after its load (issue 21).
	KeptParked int64

	SnapshotsLoaded int64 // claims that started from a snapshot
	SnapshotsBad    int64 // snapshots that did not verify, ignored
	SnapshotsSaved  int64 // snapshots encoded at release

	// LeasesReclaimed counts claims that took a lease no live session
	// explained (events.Lease.Reclaimed).
	LeasesReclaimed int64
	// NotWritten counts appends, releases and session closes the server
	// refused for want of storage (events.ErrNoStorage).
	NotWritten int64
	// SnapshotsFailed are snapshots encoded at release that the store
	// could not save (too large, or unreachable).
	SnapshotsFailed int64
	// CatchUps are reads of events a thread actor knew were stored and
	// that its follow had not brought within a while.
	CatchUps int64
}

type stats struct {
	claims, abandoned, fenced, completed, failed, held, panics, sessions atomic.Int64
	claimsBusy, rechecks, rechecksDue, peeks, liveSessions, keptParked   atomic.Int64
	snapshotsLoaded, snapshotsBad, snapshotsSaved                        atomic.Int64
	leasesReclaimed, notWritten                                          atomic.Int64
	snapshotsFailed, catchUps                                            atomic.Int64
}

// Runner finds threads with work, claims them and hosts one thread actor per
// claim. It keeps no business logic: that lives in thread.Core.
//
// Its cost does not grow with the threads it holds, beyond their memory: it
// follows the whole stream with one tail and routes each event to the
// thread's actor, renews one session key that all its claims live by, and
// learns of other runners' lapsed sessions from one watch of the leases.
type Runner struct {
	cfg      Config
	store    events.Store
	subjects events.Subjects
	log      *slog.Logger
	sys      *actor.ActorSystem
	pid      *actor.PID
	stats    stats
	env      threadEnv // what its thread actors use of it, set by Start

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine of the runner and its actors
	tasks  *pool          // goDo's goroutines, counted in wg
	disp   *pool          // the actors' mailbox goroutines
	sysEnd chan struct{}  // closed when the actor system has shut down

	sessCtx    context.Context // ends the session's renewal
	sessCancel context.CancelFunc
	sessDone   chan struct{} // closed when keepSession returned
	// lastSession is the session keepSession held as it returned; read
	// only after sessDone is closed. The scheduler owns the session
	// claims are made under; keepSession, which renews it, tells it.
	lastSession events.Session

	timerMu   sync.Mutex // protects timerAt
	timerAt   time.Time  // when runTimer must tick; zero for never
	timerKick chan struct{}

	followed atomic.Uint64 // the last stream sequence the follow routed (partition 0's)
	parts    partitionView // what the ownership core says, with P > 1
	// stopCalled says Stop or Kill was called, so Wake sends nothing to
	// an actor system going down. Whether the runner drains is the
	// scheduler's to know.
	stopCalled   atomic.Bool
	stopOnce     sync.Once
	done         chan struct{} // closed when the runner actor has no children after drain
	actorStopped chan struct{} // closed when the runner actor stopped
}

// New returns a runner. Start it with Start.
func New(cfg Config) (*Runner, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	r := &Runner{
		cfg: cfg, store: cfg.Store, subjects: cfg.Store.Subjects(), log: cfg.Logger.With("runner", cfg.ID),
		done: make(chan struct{}), actorStopped: make(chan struct{}), timerKick: make(chan struct{}, 1),
	}
	if n := r.subjects.PartitionCount(); n > 1 {
		if _, ok := cfg.Store.(events.PartitionLeaser); !ok {
			return nil, fmt.Errorf("runner: a store of %d partitions must keep partition leases (events.PartitionLeaser)", n)
		}
		r.parts.routed = make([]atomic.Int64, n)
		r.parts.last = make([]atomic.Uint64, n)
	}
	return r, nil
}

// ID returns the runner's id.
func (r *Runner) ID() string { return r.cfg.ID }

// Stats returns the runner's counters.
func (r *Runner) Stats() Stats {
	return Stats{
		Claims: r.stats.claims.Load(), Abandoned: r.stats.abandoned.Load(), Fenced: r.stats.fenced.Load(),
		Completed: r.stats.completed.Load(), Failed: r.stats.failed.Load(), Held: r.stats.held.Load(),
		Panics: r.stats.panics.Load(), Sessions: r.stats.sessions.Load(),
		SnapshotsLoaded: r.stats.snapshotsLoaded.Load(), SnapshotsBad: r.stats.snapshotsBad.Load(),
		SnapshotsSaved: r.stats.snapshotsSaved.Load(), SnapshotsFailed: r.stats.snapshotsFailed.Load(),
		CatchUps:     r.stats.catchUps.Load(),
		ClaimsBusy:   r.stats.claimsBusy.Load(),
		Rechecks:     r.stats.rechecks.Load(),
		RechecksDue:  r.stats.rechecksDue.Load(),
		Peeks:        r.stats.peeks.Load(),
		LiveSessions: r.stats.liveSessions.Load(),
		KeptParked:   r.stats.keptParked.Load(),

		LeasesReclaimed: r.stats.leasesReclaimed.Load(),
		NotWritten:      r.stats.notWritten.Load(),
	}
}

// Followed returns the stream sequence of the last event the runner's follow
// of the stream handed to its actors: how far behind the log it is. With
// partitions it is partition 0's.
func (r *Runner) Followed() uint64 { return r.followed.Load() }

func (r *Runner) now() time.Time { return r.cfg.Now() }

// goDo runs fn in a goroutine that Stop and Kill wait for.
func (r *Runner) goDo(fn func()) { r.tasks.Go(fn) }

// Start opens the runner's session, starts the actor system, the follow of
// the stream, the lease watch and the work source.
func (r *Runner) Start(ctx context.Context) error {
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.sessCtx, r.sessCancel = context.WithCancel(r.ctx)
	r.sessDone = make(chan struct{})
	r.tasks = newPool(r.ctx.Done(), &r.wg)
	r.sysEnd = make(chan struct{})
	r.disp = newPool(r.sysEnd, nil)
	sctx, scancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	defer scancel()
	sess, err := r.store.OpenSession(sctx, r.cfg.ID, r.cfg.ClaimTTL)
	switch {
	case errors.Is(err, events.ErrNoStorage) && !errors.Is(err, events.ErrUnavailable):
		// A full store: start without a session, so reads work; claims
		// wait until keepSession opens one, once space is freed.
		r.log.Warn("the server is out of storage: no session yet, so no claims; retrying until space is freed", "err", err)
	case err != nil:
		r.cancel()
		return fmt.Errorf("runner: open session: %w", err)
	default:
		r.stats.sessions.Add(1)
	}
	// One follow per partition: each partition is a stream of its own,
	// with its own sequences. With partition ownership (P > 1) the runner
	// follows only the partitions it owns, as its ownership core says.
	owning := r.subjects.PartitionCount() > 1
	var tails []events.Tail
	if !owning {
		tails = make([]events.Tail, r.subjects.PartitionCount())
	}
	stopTails := func() {
		for _, t := range tails {
			if t != nil {
				t.Stop()
			}
		}
	}
	starts := make([]uint64, len(tails)) // where each follow starts: 0, new events
	for p := range tails {
		var from uint64
		if pr, ok := r.store.(events.PartitionReader); ok {
			if starts[p], err = pr.LastPartitionSeq(sctx, p); err != nil {
				stopTails()
				r.cancel()
				return fmt.Errorf("runner: follow the stream: %w", err)
			}
			from = starts[p] + 1
		}
		tails[p], err = r.store.Tail(sctx, r.subjects.PartitionAll(p), from)
		if err != nil {
			stopTails()
			r.cancel()
			return fmt.Errorf("runner: follow the stream: %w", err)
		}
	}
	watch, err := r.store.WatchLeases(sctx)
	if err != nil {
		stopTails()
		r.cancel()
		return fmt.Errorf("runner: watch leases: %w", err)
	}
	logger := r.log
	r.sys = actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger.With("lib", "protoactor") }),
		// Timers of stopped actors fire into dead letters; a short
		// throttle period lets its goroutine end soon after shutdown.
		actor.WithDeadLetterThrottleInterval(50*time.Millisecond),
	)
	r.env = threadEnv{cfg: &r.cfg, store: r.store, stats: &r.stats, log: r.log, ctx: r.ctx, root: r.sys.Root,
		goDo: r.goDo, now: r.now, snapshotSaved: r.snapshotSaved}
	var own *ownership
	if owning {
		own = newOwnership(r, sess.ID)
	}
	ra := newRunnerActor(r, r.newScheduler(sess, own), own)
	props := actor.PropsFromProducer(func() actor.Actor { return ra },
		actor.WithDispatcher(r.disp),
		// A panicking thread actor is stopped, never restarted: the
		// producer returns the same instance, which would restart on
		// stale state. The runner then hands its thread over.
		actor.WithSupervisor(actor.NewOneForOneStrategy(0, 0, func(reason any) actor.Directive {
			return actor.StopDirective
		})))
	pid, err := r.sys.Root.SpawnNamed(props, "runner")
	if err != nil {
		stopTails()
		watch.Stop()
		r.cancel()
		return fmt.Errorf("runner: spawn: %w", err)
	}
	r.pid = pid
	if own != nil {
		r.send(ownStart{})
	}
	for p, t := range tails {
		r.goDo(func() { r.follow(r.ctx, p, t, starts[p]) })
	}
	r.goDo(func() { r.watchLeases(watch) })
	r.goDo(func() { r.keepSession(sess) })
	r.goDo(r.runTimer)
	if w := r.cfg.Work; w != nil && (own == nil || own.opener == nil) {
		// With partitions and a source that cannot be split, wake-ups of
		// partitions this runner does not own are left unacknowledged,
		// for the owner (after the source's redelivery delay).
		r.goDo(func() { r.pullWork(w) })
	}
	return nil
}

// newScheduler returns the scheduler of a runner that opened sess (none
// when its ID is ""), its jitter seeded at random. With own, it claims only
// the threads of the partitions the runner owns.
func (r *Runner) newScheduler(sess events.Session, own *ownership) *sched.Scheduler {
	var owns func(string) bool
	if own != nil {
		owns = own.owns
	}
	return sched.New(sched.Config{
		Owns:        owns,
		ClaimTTL:    r.cfg.ClaimTTL,
		MaxClaiming: r.cfg.MaxClaiming,
		Work:        r.cfg.Work != nil,
		Seed:        mrand.Uint64(),
		Logger:      r.log,
	}, sess)
}

// send delivers msg to the runner actor.
func (r *Runner) send(msg any) { r.sys.Root.Send(r.pid, msg) }

// follow feeds every event of partition p's stream after last, in order,
// to the runner actor, until ctx ends. The stream holds only thread events
// and the guards of guarded appends, and never deletes any, so its
// sequences have no holes but the guards the tail skips, which the event
// after one says (GuardBefore): any other jump means events were missed,
// and the follow starts again after the last one routed. last is 0 when
// the store could not say where the stream ended: the first event is then
// taken as it comes.
//
// A tail that goes quiet while its stream grows is opened again: with
// nothing delivered for followIdle after the stream was seen to hold an
// event past the last routed, the tail is taken for stalled. Clocks decide
// only when to look; the follow resumes after the last event routed.
func (r *Runner) follow(ctx context.Context, p int, t events.Tail, last uint64) {
	pr, _ := r.store.(events.PartitionReader)
	var idle *idleCtx // nil without a store to check the stream with
	if pr != nil {
		idle = newIdleCtx(ctx, followIdle)
		defer idle.stop()
	}
	var behind uint64 // the stream's last sequence at the last idle check, if past last
	for {
		nctx := ctx
		if idle != nil {
			nctx = idle.ctx
		}
		env, err := t.Next(nctx)
		if err != nil && ctx.Err() == nil && idle != nil && idle.ctx.Err() != nil {
			idle.rearm()
			if behind == 0 {
				cctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
				if n, err := pr.LastPartitionSeq(cctx, p); err == nil && n > last {
					behind = n
				}
				cancel()
				continue
			}
			err = fmt.Errorf("runner: follow of partition %d stalled: nothing delivered after %d for %s, with %d stored", p, last, followIdle, behind)
		} else if err == nil && idle != nil {
			idle.rearm()
			behind = 0
		}
		if err == nil && (last == 0 && pr == nil || env.Seq == last+1 || env.GuardBefore && env.Seq == last+2) {
			last = env.Seq
			r.send(sched.Routed{Env: env})
			if p == 0 {
				r.followed.Store(last)
			}
			if p < len(r.parts.routed) {
				r.parts.routed[p].Add(1)
				r.parts.last[p].Store(last)
			}
			continue
		}
		if err == nil && env.Seq <= last {
			continue // delivered twice
		}
		t.Stop()
		if ctx.Err() != nil {
			return
		}
		behind = 0
		if err != nil {
			r.log.Warn("stream follow ended; following again", "partition", p, "after", last, "err", err)
		} else {
			r.log.Warn("gap in the stream follow; following again", "partition", p, "after", last, "got", env.Seq)
		}
		from := last + 1
		if pr == nil && last == 0 {
			from = 0 // where the stream ended is not known: new events
		}
		t = r.openTail(ctx, p, from)
		if t == nil {
			return
		}
	}
}

// followIdle is how long a follow waits for an event before it checks its
// stream for newer ones; see follow. Tests shorten it.
var followIdle = 5 * time.Second

// idleCtx is a context that ends after a quiet spell, re-armed per event
// with no allocation while its timer has not fired.
type idleCtx struct {
	parent context.Context
	d      time.Duration
	ctx    context.Context
	cancel context.CancelFunc
	timer  *time.Timer
}

func newIdleCtx(parent context.Context, d time.Duration) *idleCtx {
	c := &idleCtx{parent: parent, d: d}
	c.fresh()
	return c
}

func (c *idleCtx) fresh() {
	c.ctx, c.cancel = context.WithCancel(c.parent)
	c.timer = time.AfterFunc(c.d, c.cancel)
}

// rearm starts the quiet spell again.
func (c *idleCtx) rearm() {
	if c.timer.Stop() {
		c.timer.Reset(c.d)
		return
	}
	c.cancel() // fired: this ctx is done, or about to be
	c.fresh()
}

func (c *idleCtx) stop() {
	c.timer.Stop()
	c.cancel()
}

// openTail opens partition p's follow from sequence from (new events when
// 0), retrying until it can or ctx ends.
func (r *Runner) openTail(ctx context.Context, p int, from uint64) events.Tail {
	b := sys.NewBackoff(50*time.Millisecond, 2*time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
		t, err := r.store.Tail(cctx, r.subjects.PartitionAll(p), from)
		cancel()
		if err == nil {
			return t
		}
		if ctx.Err() != nil {
			return nil
		}
		r.log.Warn("cannot follow the stream; retrying", "err", err)
		if !b.Wait(ctx) {
			return nil
		}
	}
}

// watchLeases feeds lease and session changes to the runner actor, opening
// the watch again when it ends.
func (r *Runner) watchLeases(w events.LeaseWatch) {
	for {
		u, err := w.Next(r.ctx)
		if err == nil {
			r.send(sched.LeaseChanged{Update: u})
			continue
		}
		w.Stop()
		if r.ctx.Err() != nil {
			return
		}
		r.log.Warn("lease watch ended; watching again", "err", err)
		b := sys.NewBackoff(50*time.Millisecond, 2*time.Second)
		for {
			if !b.Wait(r.ctx) {
				return
			}
			ctx, cancel := context.WithTimeout(r.ctx, r.cfg.CallTimeout)
			w, err = r.store.WatchLeases(ctx)
			cancel()
			if err == nil {
				r.send(sched.LeaseWatchReset{})
				break
			}
			r.log.Warn("cannot watch leases; retrying", "err", err)
		}
	}
}

// keepSession renews the session s every TTL/3 and tells the runner actor
// of each renewal. When it is lost, it tells the runner actor, which gives
// up every claim, and opens a new one. It owns the session it renews; the
// scheduler holds a copy for its claims, so it never waits on storage.
func (r *Runner) keepSession(s events.Session) {
	defer close(r.sessDone)
	defer func() { r.lastSession = s }()
	ctx := r.sessCtx
	if s.ID == "" {
		ns, ok := r.openSession(ctx)
		if !ok {
			return
		}
		s = ns
		r.send(sched.SessionOpened{Session: ns})
	}
	delay := r.cfg.ClaimTTL / 3
	for {
		if !sys.Sleep(ctx, delay) {
			return
		}
		delay = r.cfg.ClaimTTL / 3
		cctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
		ns, err := r.store.RenewSession(cctx, s)
		cancel()
		r.cfg.Observer.LeaseRenewed(err)
		switch {
		case err == nil:
			s = ns
			r.send(sched.SessionRenewed{Session: ns})
			continue
		case !errors.Is(err, events.ErrLeaseLost):
			// Storage unreachable: keep trying. The fence keeps writes
			// safe whatever happens to the session meanwhile.
			if ctx.Err() == nil {
				r.log.Warn("session renewal failed", "session", s.ID, "err", err)
			}
			delay = max(r.cfg.ClaimTTL/10, 10*time.Millisecond)
			continue
		}
		r.log.Warn("session lost; every claim of it is given up", "session", s.ID, "err", err)
		r.send(sched.SessionLost{ID: s.ID})
		ns, ok := r.openSession(ctx)
		if !ok {
			return
		}
		s = ns
		r.send(sched.SessionOpened{Session: ns})
	}
}

// closeSession stops the session's renewal and closes it, lapsing at once
// every lease still under it.
func (r *Runner) closeSession(ctx context.Context) {
	r.sessCancel()
	<-r.sessDone
	cctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	defer cancel()
	s := r.lastSession
	if s.ID == "" {
		return // never opened
	}
	if err := r.store.CloseSession(cctx, s); err != nil && !errors.Is(err, events.ErrLeaseLost) {
		if errors.Is(err, events.ErrNoStorage) {
			r.stats.notWritten.Add(1)
		}
		r.log.Warn("close session failed; it lapses after its TTL", "session", s.ID, "err", err)
	}
}

func (r *Runner) openSession(ctx context.Context) (events.Session, bool) {
	b := sys.NewBackoff(50*time.Millisecond, 2*time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
		s, err := r.store.OpenSession(cctx, r.cfg.ID, r.cfg.ClaimTTL)
		cancel()
		if err == nil {
			r.stats.sessions.Add(1)
			return s, true
		}
		if ctx.Err() != nil {
			return events.Session{}, false
		}
		r.log.Warn("cannot open a session; retrying", "err", err)
		if !b.Wait(ctx) {
			return events.Session{}, false
		}
	}
}

func (r *Runner) pullWork(w WorkSource) {
	defer w.Stop()
	for {
		th, ack, err := w.Next(r.ctx)
		if err != nil {
			// Stop releases the source before it ends the runner's
			// context: an end then is the stop's, not an error.
			if r.ctx.Err() == nil && !r.stopCalled.Load() {
				r.log.Error("work source ended", "err", err)
			}
			return
		}
		r.send(sched.Woken{Thread: th, Ack: ack})
	}
}

// Stop drains: no new claims, active runs get ShutdownGrace to finish, then
// are cancelled and recorded as failed, every claim is released and the
// session closed. It returns when all thread actors stopped or ctx ends,
// then stops the actor system.
func (r *Runner) Stop(ctx context.Context) error {
	var err error
	r.stopOnce.Do(func() {
		r.stopCalled.Store(true)
		if r.subjects.PartitionCount() > 1 {
			r.send(leave{}) // hand the partitions over, then drain
		} else {
			r.send(sched.Drain{})
		}
		select {
		case <-r.done:
			r.closeSession(ctx)
			if w, ok := r.cfg.Work.(WorkReleaser); ok {
				w.Release()
			}
		case <-ctx.Done():
			err = fmt.Errorf("runner: stop: %w", ctx.Err())
		}
		r.shutdown()
	})
	return err
}

// Kill stops at once without releasing or recording anything, as a crash
// would: the session lapses after its TTL, other runners take the threads
// over and abandon the runs.
func (r *Runner) Kill() {
	r.stopOnce.Do(func() {
		r.stopCalled.Store(true)
		r.shutdown()
	})
}

func (r *Runner) shutdown() {
	r.cancel()
	// Stopping the runner actor stops its children first. Once it has
	// stopped nothing adds to wg, so waiting is safe.
	r.sys.Root.Stop(r.pid)
	<-r.actorStopped
	r.wg.Wait()
	r.sys.Shutdown()
	close(r.sysEnd)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
