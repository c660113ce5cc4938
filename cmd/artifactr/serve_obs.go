package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/obs"
	"github.com/artifactr/artifactr/projections/summaries"
)

// serveObs is serve's observability: turn spans when the OTEL_* variables
// ask for them, and with --metrics the Prometheus endpoint.
type serveObs struct {
	observer      *obs.Observer
	metrics       *obs.Metrics // nil without --metrics
	stopTracing   func(context.Context) error
	srv           *obs.Server // nil without --metrics
	runnerStarted atomic.Bool
}

// startObs sets up tracing from the environment and, when addr is set,
// serves /metrics, /healthz and /readyz on it. Ready means connected to
// NATS, the stream present, and the runner started.
func (a *app) startObs(ctx context.Context, addr string, store *natsstore.Store, bucket string) (*serveObs, error) {
	tp, stop, err := obs.TracerProviderFromEnv(ctx, "artifactr", a.stderr)
	if err != nil {
		return nil, fail(err)
	}
	so := &serveObs{stopTracing: stop}
	cfg := obs.Config{Logger: a.log, ErrorCode: natsstore.ErrorCode}
	if tp != nil {
		cfg.TracerProvider = tp
		fmt.Fprintln(a.stdout, "artifactr serve: tracing on (OTEL_* environment): one span per turn")
	}
	if addr == "" {
		so.observer = obs.New(cfg)
		return so, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if cfg.Metrics, err = obs.NewMetrics(reg); err != nil {
		return nil, fail(err)
	}
	lag := func(ctx context.Context) (uint64, error) {
		l, err := summaries.ReadLag(ctx, store, bucket, summaries.DefaultDurable)
		return l.Behind, err
	}
	if err := obs.RegisterProjectorLag(reg, lag, a.log); err != nil {
		return nil, fail(err)
	}
	so.observer, so.metrics = obs.New(cfg), cfg.Metrics
	ready := func(ctx context.Context) error {
		if !store.Conn().IsConnected() {
			return errors.New("not connected to NATS")
		}
		if _, err := store.LastStreamSeq(ctx); err != nil {
			return fmt.Errorf("stream: %w", err)
		}
		if !so.runnerStarted.Load() {
			return errors.New("runner not started")
		}
		return nil
	}
	if so.srv, err = obs.Listen(addr, obs.Handler(reg, ready), a.log); err != nil {
		_ = stop(ctx)
		return nil, usage(err)
	}
	fmt.Fprintf(a.stdout, "artifactr serve: metrics on http://%s/metrics (and /healthz, /readyz)\n", so.srv.Addr())
	return so, nil
}

// runnerObserver is the runner's Config.Observer.
func (so *serveObs) runnerObserver() runner.Observer { return so.observer }

// stranded counts a stranded thread the projector found.
func (so *serveObs) stranded() {
	if so.metrics != nil {
		so.metrics.StrandedThreads.Inc()
	}
}

// started marks the runner started, for /readyz.
func (so *serveObs) started() { so.runnerStarted.Store(true) }

// close stops the endpoint and flushes the spans.
func (so *serveObs) close(ctx context.Context) {
	so.runnerStarted.Store(false)
	if so.srv != nil {
		_ = so.srv.Close()
	}
	_ = so.stopTracing(context.WithoutCancel(ctx))
}
