package main

import (
	"context"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/internal/obs"
)

// postTraced posts text with a W3C trace context in its headers, so the run
// that takes it continues the trace. The context is a "post" span's when
// the OTEL_* variables turn tracing on, else the TRACEPARENT (and
// TRACESTATE) environment variable's, passed through; with neither, the
// post carries none. Telemetry never fails a post: a bad OTEL_*
// configuration is logged and tracing left off.
func (a *app) postTraced(ctx context.Context, cl *client.Client, thread, text, id, author, strategy string) (client.Posted, error) {
	tp, stop, err := obs.TracerProviderFromEnv(ctx, "artifactr", a.stderr)
	if err != nil {
		a.log.Warn("tracing off", "err", err)
	}
	defer func() { _ = stop(context.WithoutCancel(ctx)) }() // flushes the post span
	ctx = obs.ContextWithTraceParent(ctx, os.Getenv("TRACEPARENT"), os.Getenv("TRACESTATE"))
	var provider trace.TracerProvider // nil: tracing off (tp is a nil pointer then)
	if tp != nil {
		provider = tp
	}
	ctx, span := obs.StartPost(ctx, provider, thread)
	defer span.End()
	traceparent, tracestate := obs.TraceContext(ctx)
	opts := []client.PostOption{client.WithAuthor(author), client.WithTraceContext(traceparent, tracestate)}
	if id != "" {
		opts = append(opts, client.WithMessageID(id))
	}
	if strategy != "" {
		opts = append(opts, client.WithStrategy(strategy))
	}
	ack, err := cl.Post(ctx, thread, text, opts...)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(attribute.Int64("artifactr.seq", int64(ack.Seq)), attribute.Bool("artifactr.duplicate", ack.Duplicate))
	}
	return ack, err
}
