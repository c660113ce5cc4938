package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"artifactr/actors/agent"
	"artifactr/events"
	"artifactr/events/eventspb"
	"artifactr/projections"
)

// idleTicks is how many idle-timer ticks make IdleTimeout.
const idleTicks = 4

// WorkSource yields threads that may have work: new posts. Several runners
// may share one source so that each post wakes one runner.
type WorkSource interface {
	// Next blocks until a thread may have work.
	Next(ctx context.Context) (string, error)
	// Stop ends the source.
	Stop()
}

// Config configures a [Runner].
type Config struct {
	// Store is the event log. Required.
	Store events.Store
	// Agent executes turns. Default: agent.Echo{}.
	Agent agent.Agent
	// ID names the runner in claim holders. Default: host-pid-random.
	ID string
	// ClaimTTL is the lease TTL; leases are renewed every ClaimTTL/3.
	// Default 10s.
	ClaimTTL time.Duration
	// IdleTimeout releases a claim with nothing to do. Default 30s.
	IdleTimeout time.Duration
	// SweepInterval is how often the runner looks for threads whose lease
	// lapsed or was released with work left. Default ClaimTTL/2, jittered.
	SweepInterval time.Duration
	// ShutdownGrace is how long Stop lets active runs finish before it
	// cancels them. Default 5s.
	ShutdownGrace time.Duration
	// CallTimeout bounds each storage call the runner makes. Default 10s.
	CallTimeout time.Duration
	// Work yields threads with new posts. Default: a tail of every post,
	// which suits one runner; natsstore offers a source shared by runners.
	Work WorkSource
	// Subjects names the stream's subjects; must match the store's.
	Subjects events.Subjects
	// Logger logs. Default slog.Default().
	Logger *slog.Logger
	// Now is the runner's clock, for event times only. Default time.Now.
	Now func() time.Time
	// BeforeAppend, if set, is called before each append a thread actor
	// makes. Tests use it to stall writes past the TTL.
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
		host, _ := os.Hostname()
		c.ID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), randHex(4))
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
	if c.SweepInterval <= 0 {
		c.SweepInterval = c.ClaimTTL / 2
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 5 * time.Second
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 10 * time.Second
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
}

type stats struct {
	claims, abandoned, fenced, completed, failed atomic.Int64
}

// Runner finds threads with work, claims them and hosts one thread actor per
// claim. It keeps no business logic: that lives in thread.Core.
type Runner struct {
	cfg      Config
	store    events.Store
	subjects events.Subjects
	log      *slog.Logger
	sys      *actor.ActorSystem
	pid      *actor.PID
	stats    stats

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	drainingFlag atomic.Bool
	stopOnce     sync.Once
	done         chan struct{} // closed when the runner actor has no children after drain
	actorStopped chan struct{} // closed when the runner actor stopped
}

// New returns a runner. Start it with Start.
func New(cfg Config) (*Runner, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg, store: cfg.Store, subjects: cfg.Subjects, log: cfg.Logger.With("runner", cfg.ID), done: make(chan struct{}), actorStopped: make(chan struct{})}, nil
}

// ID returns the runner's id.
func (r *Runner) ID() string { return r.cfg.ID }

// Stats returns the runner's counters.
func (r *Runner) Stats() Stats {
	return Stats{
		Claims: r.stats.claims.Load(), Abandoned: r.stats.abandoned.Load(), Fenced: r.stats.fenced.Load(),
		Completed: r.stats.completed.Load(), Failed: r.stats.failed.Load(),
	}
}

func (r *Runner) now() time.Time { return r.cfg.Now() }

func (r *Runner) draining() bool { return r.drainingFlag.Load() }

// Start starts the actor system, the work source and the sweeper.
func (r *Runner) Start(ctx context.Context) error {
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	logger := r.log
	r.sys = actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger.With("lib", "protoactor") }),
		// Timers of stopped actors fire into dead letters; a short
		// throttle period lets its goroutine end soon after shutdown.
		actor.WithDeadLetterThrottleInterval(50*time.Millisecond),
	)
	pid, err := r.sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return &runnerActor{r: r, children: map[string]*actor.PID{}, claiming: map[string]bool{}}
	}), "runner")
	if err != nil {
		return fmt.Errorf("runner: spawn: %w", err)
	}
	r.pid = pid
	work := r.cfg.Work
	if work == nil {
		t, err := r.store.Tail(r.ctx, r.subjects.AllOf(events.KindPosted), 0)
		if err != nil {
			r.cancel()
			return fmt.Errorf("runner: follow posts: %w", err)
		}
		work = tailSource{t}
	}
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		defer work.Stop()
		for {
			th, err := work.Next(r.ctx)
			if err != nil {
				if r.ctx.Err() == nil {
					r.log.Error("work source ended", "err", err)
				}
				return
			}
			r.sys.Root.Send(r.pid, workItem{thread: th})
		}
	}()
	go func() {
		defer r.wg.Done()
		r.sweepLoop()
	}()
	return nil
}

type tailSource struct{ t events.Tail }

func (s tailSource) Next(ctx context.Context) (string, error) {
	env, err := s.t.Next(ctx)
	return env.Thread, err
}
func (s tailSource) Stop() { s.t.Stop() }

// Stop drains: no new claims, active runs get ShutdownGrace to finish, then
// are cancelled and recorded as failed, and every claim is released. It
// returns when all thread actors stopped or ctx ends, then stops the actor
// system.
func (r *Runner) Stop(ctx context.Context) error {
	var err error
	r.stopOnce.Do(func() {
		r.drainingFlag.Store(true)
		r.sys.Root.Send(r.pid, drainAll{})
		select {
		case <-r.done:
		case <-ctx.Done():
			err = fmt.Errorf("runner: stop: %w", ctx.Err())
		}
		r.shutdown()
	})
	return err
}

// Kill stops at once without releasing or recording anything, as a crash
// would: leases lapse after their TTL and the next claimant abandons the
// runs.
func (r *Runner) Kill() {
	r.stopOnce.Do(func() {
		r.drainingFlag.Store(true)
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
}

func (r *Runner) sweepLoop() {
	settled := map[string]lastSeqs{} // threads seen with nothing to do, at these seqs
	delay := time.Duration(0)
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-time.After(delay):
		}
		r.sweep(settled)
		delay = jitter(r.cfg.SweepInterval)
	}
}

// sweep finds threads whose lease is not live and that have work: a pending
// message, or a run an older claim left active.
// lastSeqs are a thread's last posted and run sequences; while they stand
// still, a thread found settled stays settled.
type lastSeqs struct{ posted, run uint64 }

func (r *Runner) sweep(settled map[string]lastSeqs) {
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.CallTimeout)
	defer cancel()
	threads, err := r.store.Threads(ctx)
	if err != nil {
		if r.ctx.Err() == nil {
			r.log.Warn("sweep: list threads", "err", err)
		}
		return
	}
	for _, th := range threads {
		if r.ctx.Err() != nil || r.draining() {
			return
		}
		if _, live, err := r.store.GetLease(ctx, th); err != nil || live {
			continue
		}
		last, err := r.store.LastSeq(ctx, th, events.KindPosted)
		if err != nil {
			continue
		}
		lastRun, _ := r.store.LastSeq(ctx, th, events.KindRun)
		key := lastSeqs{posted: last, run: lastRun}
		if settled[th] == key {
			continue
		}
		envs, err := r.store.Load(ctx, th, 1)
		if err != nil {
			continue
		}
		v := projections.Fold(th, envs)
		if len(v.Pending()) == 0 && v.ActiveRun == nil {
			settled[th] = key
			continue
		}
		delete(settled, th)
		r.sys.Root.Send(r.pid, workItem{thread: th})
	}
}

func jitter(d time.Duration) time.Duration {
	n, _ := rand.Int(rand.Reader, big.NewInt(int64(d/5)+1))
	return d - d/10 + time.Duration(n.Int64())
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Messages to the runner actor.
type (
	workItem    struct{ thread string }
	claimResult struct {
		thread  string
		claim   events.Claim
		history []events.Envelope
		err     error
	}
	drainAll struct{}
)

// runnerActor routes work to thread actors. It holds no business logic, as
// a panic in it would stop every thread actor.
type runnerActor struct {
	r        *Runner
	children map[string]*actor.PID
	claiming map[string]bool
	draining bool
}

func (ra *runnerActor) Receive(ctx actor.Context) {
	r := ra.r
	switch m := ctx.Message().(type) {
	case workItem:
		if ra.draining || ra.children[m.thread] != nil || ra.claiming[m.thread] {
			return
		}
		ra.claiming[m.thread] = true
		self := ctx.Self()
		holder := r.cfg.ID + "/" + randHex(6)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			cctx, cancel := context.WithTimeout(r.ctx, r.cfg.CallTimeout)
			defer cancel()
			c, h, err := events.AcquireClaim(cctx, r.store, m.thread, holder, r.cfg.ClaimTTL, r.now())
			r.sys.Root.Send(self, claimResult{thread: m.thread, claim: c, history: h, err: err})
		}()
	case *actor.Stopped:
		close(r.actorStopped)
	case claimResult:
		delete(ra.claiming, m.thread)
		defer ra.maybeDone()
		if m.err != nil {
			if !errors.Is(m.err, events.ErrThreadBusy) && r.ctx.Err() == nil {
				r.log.Warn("claim failed", "thread", m.thread, "err", m.err)
			}
			return
		}
		if ra.draining {
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				rctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.cfg.CallTimeout)
				defer cancel()
				_ = events.ReleaseClaim(rctx, r.store, m.claim, "shutdown", r.now())
			}()
			return
		}
		ta := newThreadActor(r, m.claim, m.history)
		pid, err := ctx.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return ta }), m.thread)
		if err != nil {
			r.log.Error("spawn thread actor", "thread", m.thread, "err", err)
			return
		}
		ctx.Watch(pid)
		ra.children[m.thread] = pid
	case *actor.Terminated:
		for th, pid := range ra.children {
			if pid.Equal(m.Who) {
				delete(ra.children, th)
			}
		}
		ra.maybeDone()
	case drainAll:
		ra.draining = true
		for _, pid := range ra.children {
			ctx.Send(pid, drainReq{})
		}
		ra.maybeDone()
	}
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
