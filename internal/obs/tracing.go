package obs

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TracingEnabled reports whether the standard OpenTelemetry environment
// variables ask for traces: OTEL_TRACES_EXPORTER names an exporter other
// than "none", or, with it unset, an OTLP endpoint is set
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
// OTEL_SDK_DISABLED=true turns tracing off whatever else is set.
func TracingEnabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch e := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); e {
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	default:
		return e != "none"
	}
}

// TracerProviderFromEnv returns a tracer provider configured by the
// standard OTEL_* environment variables, or nil when they ask for no
// tracing (see [TracingEnabled]); shutdown flushes and stops it, and is
// never nil.
//
// OTEL_TRACES_EXPORTER is "otlp" (the default when an endpoint is set) or
// "console" (spans as JSON on console). The OTLP protocol is
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL:
// "http/protobuf" (the default) or "grpc". The exporters read their own
// OTEL_EXPORTER_OTLP_* variables (endpoint, headers, timeout, insecure,
// certificates); the SDK reads OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG
// and OTEL_BSP_*; the resource reads OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES. service is the service name unless
// OTEL_SERVICE_NAME is set.
func TracerProviderFromEnv(ctx context.Context, service string, console io.Writer) (*sdktrace.TracerProvider, func(context.Context) error, error) {
	return tracerProvider(ctx, service, os.Getenv, console)
}

func tracerProvider(ctx context.Context, service string, getenv func(string) string, console io.Writer) (*sdktrace.TracerProvider, func(context.Context) error, error) {
	nop := func(context.Context) error { return nil }
	if !TracingEnabled(getenv) {
		return nil, nop, nil
	}
	var exp sdktrace.SpanExporter
	var err error
	switch e := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); e {
	case "", "otlp":
		exp, err = otlpExporter(ctx, getenv)
	case "console":
		exp, err = stdouttrace.New(stdouttrace.WithWriter(console))
	default:
		// Several exporters ("otlp,console") or others (zipkin) are not
		// built in.
		return nil, nop, fmt.Errorf("obs: OTEL_TRACES_EXPORTER=%q: want otlp, console or none", e)
	}
	if err != nil {
		return nil, nop, fmt.Errorf("obs: trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // after the default name, so OTEL_SERVICE_NAME wins
	)
	if err != nil {
		return nil, nop, fmt.Errorf("obs: trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

func otlpExporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "", "http/protobuf":
		return otlptracehttp.New(ctx)
	case "grpc":
		return otlptracegrpc.New(ctx)
	}
	return nil, fmt.Errorf("OTLP protocol %q: want http/protobuf or grpc", proto)
}

// TraceContext returns the W3C traceparent and tracestate of ctx's span,
// "" when it has none.
func TraceContext(ctx context.Context) (traceparent, tracestate string) {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"], c["tracestate"]
}

// ContextWithTraceParent returns ctx carrying the remote span context of a
// W3C traceparent (and tracestate), so spans started from it join that
// trace. A malformed or empty traceparent leaves ctx as it is.
func ContextWithTraceParent(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent, "tracestate": tracestate})
}

// StartPost starts the span of a post to thread under tp, a child of ctx's
// span; with a nil tp it starts nothing and returns ctx and a no-op span.
// The post carries the returned context's [TraceContext].
func StartPost(ctx context.Context, tp trace.TracerProvider, thread string) (context.Context, trace.Span) {
	if tp == nil {
		return ctx, trace.SpanFromContext(context.Background()) // a no-op span: ending it ends nothing of ctx's
	}
	return tp.Tracer("github.com/artifactr/artifactr/post").Start(ctx, "post",
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(AttrThread.String(thread)))
}
