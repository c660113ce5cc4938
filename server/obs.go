package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/obs"
	"github.com/artifactr/artifactr/projections/summaries"
)

// observability is the runner's observer and, with Config.MetricsAddr,
// the Prometheus endpoint.
type observability struct {
	observer *obs.Observer
	metrics  *obs.Metrics // nil without MetricsAddr
	srv      *obs.Server  // nil without MetricsAddr
	started  atomic.Bool  // the runner started: /readyz
}

// startObs makes the observer and, when cfg.MetricsAddr is set, serves
// /metrics, /healthz and /readyz on it. Ready means connected to NATS, the
// stream present, and the runner started.
func startObs(cfg Config) (*observability, error) {
	o := &observability{}
	ocfg := obs.Config{Logger: cfg.Logger, ErrorCode: natsstore.ErrorCode, TracerProvider: cfg.TracerProvider}
	if cfg.MetricsAddr == "" {
		o.observer = obs.New(ocfg)
		return o, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var err error
	if ocfg.Metrics, err = obs.NewMetrics(reg); err != nil {
		return nil, err
	}
	store := cfg.Store
	lag := func(ctx context.Context) (uint64, error) {
		l, err := summaries.ReadLag(ctx, store, cfg.Summaries, summaries.DefaultDurable)
		return l.Behind, err
	}
	if err := obs.RegisterProjectorLag(reg, lag, cfg.Logger); err != nil {
		return nil, err
	}
	o.observer, o.metrics = obs.New(ocfg), ocfg.Metrics
	ready := func(ctx context.Context) error {
		if !store.Conn().IsConnected() {
			return errors.New("not connected to NATS")
		}
		for p := range store.Partitions() {
			if _, err := store.LastPartitionSeq(ctx, p); err != nil {
				return fmt.Errorf("stream: %w", err)
			}
		}
		if !o.started.Load() {
			return errors.New("runner not started")
		}
		return nil
	}
	if o.srv, err = obs.Listen(cfg.MetricsAddr, obs.Handler(reg, ready), cfg.Logger); err != nil {
		return nil, err
	}
	return o, nil
}

// stranded counts a stranded thread the projector found.
func (o *observability) stranded() {
	if o.metrics != nil {
		o.metrics.StrandedThreads.Inc()
	}
}

// close stops the endpoint.
func (o *observability) close() {
	o.started.Store(false)
	if o.srv != nil {
		_ = o.srv.Close()
	}
}
