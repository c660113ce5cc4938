// Package obs is artifactr's observability: Prometheus metrics, OpenTelemetry
// turn spans and per-run log lines, fed by a runner through its
// [runner.Observer] hooks, and the HTTP endpoints serve exposes.
//
// # Usage
//
//	reg := prometheus.NewRegistry()
//	m, _ := obs.NewMetrics(reg)
//	tp, shutdown, _ := obs.TracerProviderFromEnv(ctx, "artifactr", os.Stderr) // nil: tracing off
//	defer shutdown(ctx)
//	o := obs.New(obs.Config{Metrics: m, TracerProvider: tp, Logger: log, ErrorCode: natsstore.ErrorCode})
//	r, _ := runner.New(runner.Config{Store: store, Observer: o})
//	srv, _ := obs.Listen(addr, obs.Handler(reg, ready), log)
//
// The metric names and meanings are in the README's observability section
// and on each collector's help text; [Metrics] lists them.
//
// Tracing is off unless the standard OTEL_* environment variables ask for
// an exporter; then each turn is one span, from its run_started to its end,
// a child of the span whose trace context the prompt's post carried.
package obs
