package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/console"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/projections/summaries"
)

// Config configures a [Server]. Only Store is required.
type Config struct {
	// Store is the runner's connection to the stream and the lease
	// bucket, open. The work queue, the read model, the readiness check,
	// the console and the webhooks use it too. The server does not close
	// it: the caller opened it and closes it after Stop or Kill. Required.
	Store *natsstore.Store
	// Runner configures the runner. Runner.Store, when nil, is Store; a
	// caller's own must write to Store's stream (tests wrap Store to
	// inject faults). Runner.Work is the server's: leave it nil.
	// Runner.Observer, when nil, is the server's (metrics and spans); a
	// caller's own replaces it.
	Runner runner.Config
	// WorkQueue names the durable consumer the runners share: each post
	// wakes one of them. Default natsstore.DefaultWorkQueue.
	WorkQueue string
	// WrapWork, if set, wraps the work queue before the runner gets it
	// (tests record the wake-ups).
	WrapWork func(runner.WorkSource) runner.WorkSource
	// Projector keeps the thread-summaries read model up to date (one
	// projector across all servers does; the others stand by) and wakes
	// the runner for threads it finds stranded.
	Projector bool
	// Summaries is the read model's KV bucket. Default
	// summaries.DefaultBucket.
	Summaries string
	// MetricsAddr, when set, serves Prometheus /metrics, /healthz and
	// /readyz on it (host:port).
	MetricsAddr string
	// TracerProvider makes one span per turn; nil turns tracing off.
	TracerProvider trace.TracerProvider
	// HTTP serves the HTTP API and the console when its Addr is set.
	HTTP HTTPConfig
	// Logger logs. Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.Store == nil {
		return errors.New("server: Config.Store is required")
	}
	if c.Runner.Work != nil {
		return errors.New("server: Config.Runner.Work is the server's work queue; wrap it with WrapWork")
	}
	if c.Runner.Store == nil {
		c.Runner.Store = c.Store
	}
	if c.WorkQueue == "" {
		c.WorkQueue = natsstore.DefaultWorkQueue
	}
	if c.Summaries == "" {
		c.Summaries = summaries.DefaultBucket
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Runner.Logger == nil {
		c.Runner.Logger = c.Logger
	}
	return nil
}

// Step names the part of Start that failed, in a [StartError].
type Step string

// The steps of Start, in order.
const (
	StepConfig    Step = "config"     // Config is incomplete
	StepMetrics   Step = "metrics"    // the metrics endpoint
	StepWorkQueue Step = "work queue" // opening the work queue
	StepRunner    Step = "runner"     // runner.New: the runner's config
	StepStart     Step = "start"      // the runner's start: its session
	StepProjector Step = "projector"  // the summaries projector's config
	StepHTTP      Step = "http"       // the HTTP API and console
)

// StartError is returned by Start: the step that failed and its error.
// Its text is the step's error unchanged, so a command can show it as
// it was; callers branch on Step (a config error, or the store's).
type StartError struct {
	Step Step
	Err  error
}

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// Server is a running runner with its work queue, observers, read model
// and HTTP API. Stop or Kill it once.
type Server struct {
	cfg       Config
	r         *runner.Runner
	obs       *observability
	owner     string // the projector's owner, "" when off
	stopProj  func()
	http      *front // nil without HTTP
	closeOnce sync.Once
}

// Start starts the server: the observers (and the metrics endpoint), the
// work queue, the runner, the projector, then the HTTP API. ctx bounds the
// start; what runs after it is stopped by Stop or Kill, not by ctx's end.
// On an error nothing is left running, and the error is a *[StartError].
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, &StartError{StepConfig, err}
	}
	s := &Server{cfg: cfg}
	var err error
	if s.obs, err = startObs(cfg); err != nil {
		return nil, &StartError{StepMetrics, err}
	}
	// Posts wake runners through a shared durable consumer: one runner per
	// post, and a post made while no runner ran, or whose runner died
	// before it claimed, is delivered to one that runs.
	queue, err := cfg.Store.WorkQueue(ctx, cfg.WorkQueue)
	if err != nil {
		s.obs.close()
		return nil, &StartError{StepWorkQueue, err}
	}
	rc := cfg.Runner
	rc.Work = queue
	if cfg.WrapWork != nil {
		rc.Work = cfg.WrapWork(queue)
	}
	if rc.Observer == nil {
		rc.Observer = s.obs.observer
	}
	var recent *console.Recent
	if cfg.HTTP.Addr != "" {
		// The console shows this runner's takeovers and refused writes.
		recent = console.NewRecent(256)
		rc.Observer = console.Observe(rc.Observer, recent)
	}
	if s.r, err = runner.New(rc); err != nil {
		queue.Stop()
		s.obs.close()
		return nil, &StartError{StepRunner, err}
	}
	if err := s.r.Start(ctx); err != nil {
		queue.Stop()
		s.obs.close()
		return nil, &StartError{StepStart, err}
	}
	s.obs.started.Store(true)
	if cfg.Projector {
		if err := s.startProjector(ctx, runner.ConsumeBound(s.ClaimTTL(), queue.AckWait())); err != nil {
			s.Kill()
			return nil, &StartError{StepProjector, err}
		}
	}
	if cfg.HTTP.Addr != "" {
		if s.http, err = startHTTP(ctx, &cfg, recent, s.obs.observer.Metrics().Counters); err != nil {
			s.Kill()
			return nil, &StartError{StepHTTP, err}
		}
	}
	return s, nil
}

// startProjector runs the thread-summaries projectors, one per partition,
// until close. Each sees every event of its partition, once across all
// servers: it finds a thread that a runner left stranded for longer than
// strandedAfter, and this runner claims it.
func (s *Server) startProjector(ctx context.Context, strandedAfter time.Duration) error {
	owner := s.r.ID() + "/summaries"
	ps, err := summaries.NewProjectors(summaries.Config{Store: s.cfg.Store, Bucket: s.cfg.Summaries, Owner: owner, Logger: s.cfg.Logger,
		StrandedAfter: strandedAfter, Stranded: func(th string, _ time.Time) {
			s.obs.stranded()
			s.r.Wake(th)
		}})
	if err != nil {
		return err
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Run(pctx); err != nil {
				s.cfg.Logger.Error("thread-summaries projector stopped", "partition", p.Partition(), "err", err)
			}
		}()
	}
	s.owner = owner
	s.stopProj = func() { cancel(); wg.Wait() }
	return nil
}

// Stop stops the server gracefully: the runner takes no new claims, its
// active runs get Runner.ShutdownGrace to finish (then they are cancelled
// and recorded as failed), and every claim is released. If ctx ends
// first the drain gives up: the runner stops at once, releasing nothing,
// and its leases lapse. Then the HTTP API, the projector and the metrics
// endpoint stop. Stop returns the runner's error; the Store stays open.
func (s *Server) Stop(ctx context.Context) error {
	err := s.r.Stop(ctx)
	s.close()
	return err
}

// Kill stops the server at once, as a crash would: no claim is released,
// no run ends; the leases lapse and the next holder abandons the runs.
// Then the rest stops, as in Stop. A Kill after Stop has returned is a
// no-op.
func (s *Server) Kill() {
	s.r.Kill()
	s.close()
}

// close stops what runs beside the runner, in the reverse order of Start.
func (s *Server) close() {
	s.closeOnce.Do(func() {
		if s.http != nil {
			s.http.close()
		}
		if s.stopProj != nil {
			s.stopProj()
		}
		s.obs.close()
	})
}

// Run starts the server, runs it until ctx ends, then stops it, giving the
// drain Runner.ShutdownGrace plus two storage calls.
func Run(ctx context.Context, cfg Config) error {
	s, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.StopTimeout())
	defer cancel()
	return s.Stop(sctx)
}

// StopTimeout is how long a graceful Stop may take: the runs' grace plus
// two storage calls (the releases, the session's close).
func (s *Server) StopTimeout() time.Duration {
	grace, call := s.cfg.Runner.ShutdownGrace, s.cfg.Runner.CallTimeout
	if grace <= 0 {
		grace = 5 * time.Second // runner's default
	}
	if call <= 0 {
		call = 10 * time.Second // runner's default
	}
	return grace + 2*call
}

// ID is the runner's id, the first part of its claims' holders.
func (s *Server) ID() string { return s.r.ID() }

// ClaimTTL is the runner's lease TTL.
func (s *Server) ClaimTTL() time.Duration {
	if s.cfg.Runner.ClaimTTL > 0 {
		return s.cfg.Runner.ClaimTTL
	}
	return 10 * time.Second // runner's default
}

// Stats returns the runner's counters.
func (s *Server) Stats() runner.Stats { return s.r.Stats() }

// Runner is the server's runner, for what the server does not wrap
// (Describe, Wake).
func (s *Server) Runner() *runner.Runner { return s.r }

// ProjectorOwner names the summaries projector in its checkpoint; "" when
// Config.Projector is off.
func (s *Server) ProjectorOwner() string { return s.owner }

// MetricsAddr is the metrics endpoint's address; "" when off.
func (s *Server) MetricsAddr() string {
	if s.obs.srv == nil {
		return ""
	}
	return s.obs.srv.Addr()
}

// HTTPURL is the HTTP API's base URL (the console is at its /); "" when
// off.
func (s *Server) HTTPURL() string {
	if s.http == nil {
		return ""
	}
	return s.http.l.URL
}
