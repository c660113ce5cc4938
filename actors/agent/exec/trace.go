package exec

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
