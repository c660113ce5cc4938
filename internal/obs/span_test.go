package obs_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/artifactr/artifactr/actors/agent"
	agentexec "github.com/artifactr/artifactr/actors/agent/exec"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/internal/obs"
)

// spansNamed returns the ended spans called name.
func spansNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// A post carries its span's trace context; the turn it prompts is one span,
// a child of the poster's, from run_started to the run's end, with the
// thread, run id, claim_seq and outcome.
func TestObserver_turnSpanContinuesPostersTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())

	s := memstore.New(memstore.Config{})
	o := obs.New(obs.Config{TracerProvider: tp, Logger: testLogger()})
	r := startRunner(t, runner.Config{Store: s, Observer: o, ClaimTTL: 2 * time.Second})
	defer r.Stop(context.Background())

	pctx, postSpan := obs.StartPost(context.Background(), tp, "tr")
	traceparent, tracestate := obs.TraceContext(pctx)
	if traceparent == "" {
		t.Fatal("the post span has no traceparent")
	}
	post(t, s, "tr", "hello", events.WithTraceContext(traceparent, tracestate))
	postSpan.End()
	post(t, s, "tr", "fail: on purpose") // no trace context: a root span
	waitFor(t, "both turns", settled(t, s, "tr"))
	waitFor(t, "two turn spans", func() error {
		if n := len(spansNamed(rec, "turn")); n != 2 {
			return errorf("%d turn spans", n)
		}
		return nil
	})

	v := fold(t, s, "tr")
	turns := spansNamed(rec, "turn")
	ok, failed := turns[0], turns[1]
	if attr(ok, obs.AttrOutcome).AsString() != obs.OutcomeCompleted {
		ok, failed = failed, ok
	}
	want := postSpan.SpanContext()
	if ok.Parent().SpanID() != want.SpanID() || ok.SpanContext().TraceID() != want.TraceID() {
		t.Fatalf("turn span parent %s in trace %s, want the poster's span %s in trace %s",
			ok.Parent().SpanID(), ok.SpanContext().TraceID(), want.SpanID(), want.TraceID())
	}
	if !ok.Parent().IsRemote() {
		t.Error("the turn span's parent should be remote: it came through the log")
	}
	run := v.Runs[0]
	if got := attr(ok, obs.AttrThread).AsString(); got != "tr" {
		t.Errorf("thread %q", got)
	}
	if got := attr(ok, obs.AttrRunID).AsString(); got != run.ID {
		t.Errorf("run id %q, want %q", got, run.ID)
	}
	if got := attr(ok, obs.AttrClaimSeq).AsInt64(); uint64(got) != run.ClaimSeq {
		t.Errorf("claim_seq %d, want %d", got, run.ClaimSeq)
	}
	if ok.Status().Code == codes.Error {
		t.Errorf("completed turn has status %v", ok.Status())
	}
	if failed.Parent().IsValid() {
		t.Errorf("the turn of a post without trace context has parent %s", failed.Parent().SpanID())
	}
	if attr(failed, obs.AttrOutcome).AsString() != obs.OutcomeFailed || failed.Status().Code != codes.Error {
		t.Errorf("failed turn: outcome %q status %v", attr(failed, obs.AttrOutcome).AsString(), failed.Status())
	}
}

// An exec agent's turn line carries the turn span's trace context, so the
// program's spans are children of the turn.
func TestObserver_execAgentJoinsTheTurn(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	s := memstore.New(memstore.Config{})
	// The program answers with the traceparent of its turn line.
	script := `read -r turn; tp=$(printf '%s' "$turn" | sed -n 's/.*"traceparent":"\([^"]*\)".*/\1/p'); echo "{\"type\":\"done\",\"output\":\"$tp\"}"`
	r := startRunner(t, runner.Config{
		Store: s, Agent: agentexec.Agent{Path: "/bin/sh", Args: []string{"-c", script}, Timeout: 20 * time.Second},
		Observer: obs.New(obs.Config{TracerProvider: tp, Logger: testLogger()}),
	})
	defer r.Stop(context.Background())
	post(t, s, "ex", "hello")
	waitFor(t, "the turn", settled(t, s, "ex"))
	waitFor(t, "the turn span", func() error {
		if n := len(spansNamed(rec, "turn")); n != 1 {
			return errorf("%d turn spans", n)
		}
		return nil
	})
	sc := spansNamed(rec, "turn")[0].SpanContext()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if got := fold(t, s, "ex").Runs[0].Output; got != want {
		t.Fatalf("the program saw traceparent %q, want the turn span's %q", got, want)
	}
}

// A runner killed mid-run leaves its turn span ended as lost; the runner that
// takes the thread over counts a takeover and an abandoned turn, and records
// the abandoned turn's end in the poster's trace.
func TestObserver_abandonedTurn(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	log := memstore.NewLog()
	s := log.Open(memstore.Config{})
	ttl := 300 * time.Millisecond
	a := startRunner(t, runner.Config{
		Store: s, ID: "A", ClaimTTL: ttl, Agent: agent.Echo{Delay: time.Hour},
		Observer: obs.New(obs.Config{TracerProvider: tp, Logger: testLogger()}),
	})
	pctx, postSpan := obs.StartPost(context.Background(), tp, "k")
	post(t, s, "k", "one", events.WithTraceContext(obs.TraceContext(pctx)))
	postSpan.End()
	post(t, s, "k", "two")
	waitFor(t, "A's run active", func() error {
		if fold(t, s, "k").ActiveRun == nil {
			return errorf("no active run")
		}
		return nil
	})
	a.Kill()

	reg := prometheus.NewRegistry()
	m, err := obs.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	b := startRunner(t, runner.Config{
		Store: log.Open(memstore.Config{}), ID: "B", ClaimTTL: ttl,
		Observer: obs.New(obs.Config{Metrics: m, TracerProvider: tp, Logger: testLogger()}),
	})
	defer b.Stop(context.Background())
	waitFor(t, "B answers the rest", settled(t, s, "k"))
	scrape := newScraper(t, reg, nil)
	waitFor(t, "B's counters", func() error {
		got := scrape.scrape()
		if got.get("artifactr_turns_total", "outcome", "abandoned") != 1 || got.get("artifactr_turns_total", "outcome", "completed") != 1 ||
			got.get("artifactr_takeovers_total") != 1 || got.get("artifactr_turn_duration_seconds") != 2 {
			return errorf("abandoned %v completed %v takeovers %v durations %v",
				got.get("artifactr_turns_total", "outcome", "abandoned"), got.get("artifactr_turns_total", "outcome", "completed"),
				got.get("artifactr_takeovers_total"), got.get("artifactr_turn_duration_seconds"))
		}
		return nil
	})

	byOutcome := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spansNamed(rec, "turn") {
		byOutcome[attr(s, obs.AttrOutcome).AsString()] = s
	}
	want := postSpan.SpanContext()
	for _, o := range []string{obs.OutcomeLost, obs.OutcomeAbandoned} {
		s := byOutcome[o]
		if s == nil {
			t.Fatalf("no %s turn span among %v", o, byOutcome)
		}
		if s.Parent().SpanID() != want.SpanID() || s.Status().Code != codes.Error {
			t.Errorf("%s turn span: parent %s (want the poster's %s), status %v", o, s.Parent().SpanID(), want.SpanID(), s.Status())
		}
	}
	if byOutcome[obs.OutcomeCompleted] == nil {
		t.Errorf("no completed turn span for the second message")
	}
}
