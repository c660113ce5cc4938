package agent

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
)

// traceContext is the W3C trace context of ctx's span, as the traceparent and
// tracestate headers would carry it; "" when ctx has no valid span (tracing
// off). The runner puts the turn's span in the run's context, so a program
// that reads it makes its own spans children of the turn.
func traceContext(ctx context.Context) (traceparent, tracestate string) {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"], c["tracestate"]
}

// StderrFunc receives what an agent's program wrote to stderr in one run
// (its last 4 KiB) and the error the run ended with, nil if it completed.
type StderrFunc func(stderr string, err error)

type stderrKey struct{}

// WithStderr returns ctx carrying f: [Exec] calls it once per run, after the
// program was reaped, with what the program wrote to stderr. The runner uses
// it to log agents' stderr.
func WithStderr(ctx context.Context, f StderrFunc) context.Context {
	return context.WithValue(ctx, stderrKey{}, f)
}

// reportStderr hands stderr to ctx's StderrFunc, if any.
func reportStderr(ctx context.Context, stderr string, err error) {
	if f, ok := ctx.Value(stderrKey{}).(StderrFunc); ok && f != nil {
		f(stderr, err)
	}
}
