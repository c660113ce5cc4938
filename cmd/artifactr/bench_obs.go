package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/obs"
)

// benchObserver is the runner observer bench turns measures with, as serve
// --metrics runs it: metrics counted, and tracing only when the OTEL_*
// variables turn it on. stop flushes the spans.
func (a *app) benchObserver(ctx context.Context, log *slog.Logger) (*obs.Observer, func(), error) {
	tp, stop, err := obs.TracerProviderFromEnv(ctx, "artifactr-bench", a.stderr)
	if err != nil {
		return nil, nil, err
	}
	m, err := obs.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		return nil, nil, err
	}
	cfg := obs.Config{Metrics: m, Logger: log, ErrorCode: natsstore.ErrorCode}
	if tp != nil {
		cfg.TracerProvider = tp
		fmt.Fprintln(a.stdout, "bench turns: tracing on (OTEL_* environment)")
	}
	return obs.New(cfg), func() { _ = stop(context.WithoutCancel(ctx)) }, nil
}
