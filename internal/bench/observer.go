package bench

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/obs"
)

// newObserver is the runner observer bench turns measures with, as serve
// --metrics runs it: metrics counted, and tracing only when the OTEL_*
// variables turn it on. stop flushes the spans.
func newObserver(ctx context.Context, cfg *TurnsConfig) (*obs.Observer, func(), error) {
	tp, stop, err := obs.TracerProviderFromEnv(ctx, "artifactr-bench", cfg.TraceConsole)
	if err != nil {
		return nil, nil, err
	}
	m, err := obs.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		return nil, nil, err
	}
	oc := obs.Config{Metrics: m, Logger: cfg.Logger, ErrorCode: natsstore.ErrorCode}
	if tp != nil {
		oc.TracerProvider = tp
		fmt.Fprintln(cfg.Out, "bench turns: tracing on (OTEL_* environment)")
	}
	return obs.New(oc), func() { _ = stop(context.WithoutCancel(ctx)) }, nil
}
