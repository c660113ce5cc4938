package obs

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections"
)

// Span attributes of a turn span.
const (
	AttrThread   = attribute.Key("artifactr.thread")
	AttrRunID    = attribute.Key("artifactr.run_id")
	AttrClaimSeq = attribute.Key("artifactr.claim_seq")
	AttrPrompt   = attribute.Key("artifactr.prompt_seq")
	AttrOutcome  = attribute.Key("artifactr.outcome")
)

// TracerName names the tracer of turn spans.
const TracerName = "github.com/artifactr/artifactr/runner"

// maxReasonBytes bounds a failure reason in a log line or span status.
const maxReasonBytes = 512

// Config configures an [Observer].
type Config struct {
	// Metrics are updated when set; nil keeps no metrics.
	Metrics *Metrics
	// TracerProvider makes the turn spans; nil turns tracing off, at no
	// cost per turn.
	TracerProvider trace.TracerProvider
	// Logger gets the per-run lines and agents' stderr. Default
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock for latencies. Default time.Now.
	Now func() time.Time
	// ErrorCode returns the store's code for an append error, when it
	// carries one: natsstore.ErrorCode gives JetStream's API error code
	// (10071: wrong last sequence). The code label of
	// artifactr_append_errors_total shows it; errors without one are
	// labelled by class (thread_busy, timeout, ...). Default: none, every
	// error is labelled by class. obs takes it as a function so that it
	// names no store (and no JetStream client); cmd/artifactr wires it.
	ErrorCode func(error) (code int, ok bool)
}

// Observer turns a runner's hooks into metrics, turn spans and log lines.
// It implements [runner.Observer]; set it as runner.Config.Observer. obs does
// not import the runner (it depends on nothing above it); the assertion that
// it implements the interface is in this package's tests.
type Observer struct {
	m         *Metrics
	tracer    trace.Tracer // nil when tracing is off
	log       *slog.Logger
	now       func() time.Time
	errCode   func(error) (int, bool) // nil: label errors by class only
	byOutcome [4]prometheus.Counter   // artifactr_turns_total by outcome, resolved once

	mu    sync.Mutex        // protects turns
	turns map[turnKey]*turn // open turn spans; empty when tracing is off
}

type turnKey struct {
	thread   string
	claimSeq uint64
	run      string
}

// turn is an open turn span.
type turn struct {
	span trace.Span
}

// New returns an observer.
func New(cfg Config) *Observer {
	o := &Observer{m: cfg.Metrics, log: cfg.Logger, now: cfg.Now, errCode: cfg.ErrorCode, turns: map[turnKey]*turn{}}
	if cfg.TracerProvider != nil {
		o.tracer = cfg.TracerProvider.Tracer(TracerName)
	}
	if o.m == nil {
		// Unregistered: counted, never scraped, and no nil checks.
		o.m, _ = NewMetrics(prometheus.NewRegistry())
	}
	for i, oc := range outcomes {
		o.byOutcome[i] = o.m.Turns.WithLabelValues(oc)
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	if o.now == nil {
		o.now = time.Now
	}
	return o
}

// Metrics returns the observer's metrics: registered with --metrics,
// counted all the same without.
func (o *Observer) Metrics() *Metrics { return o.m }

// outcomes are the turns_total outcomes, in byOutcome's order.
var outcomes = [4]string{OutcomeCompleted, OutcomeFailed, OutcomeAbandoned, OutcomeRefused}

func (o *Observer) turnsBy(outcome string) prometheus.Counter {
	for i, oc := range outcomes {
		if oc == outcome {
			return o.byOutcome[i]
		}
	}
	return o.m.Turns.WithLabelValues(outcome)
}

// Claimed implements [runner.Observer]: it counts the claim, and a takeover
// when the thread's previous claim marker was never released.
func (o *Observer) Claimed(c events.Claim, takeover bool) {
	o.m.Claims.Inc()
	o.m.ClaimedThreads.Inc()
	if takeover {
		o.m.Takeovers.Inc()
	}
	if c.Lease.Reclaimed != "" {
		o.m.LeasesReclaimed.Inc()
	}
}

// ClaimEnded implements [runner.Observer]. A turn span still open ends as
// lost: the claim ended before the run's end was written, and the next
// holder abandons the run.
func (o *Observer) ClaimEnded(c events.Claim) {
	o.m.ClaimedThreads.Dec()
	if o.tracer == nil {
		return
	}
	var open []*turn
	o.mu.Lock()
	for k, t := range o.turns {
		if k.thread == c.Thread && k.claimSeq == c.Seq {
			open = append(open, t)
			delete(o.turns, k)
		}
	}
	o.mu.Unlock()
	for _, t := range open {
		t.span.SetAttributes(AttrOutcome.String(OutcomeLost))
		t.span.SetStatus(codes.Error, "the claim ended before the run's end was written")
		t.span.End()
	}
}

// LeaseRenewed implements [runner.Observer].
func (o *Observer) LeaseRenewed(err error) {
	o.m.LeaseRenewals.Inc()
	if err != nil {
		o.m.LeaseRenewalFailures.Inc()
	}
}

// SnapshotSaved implements [runner.SnapshotObserver].
func (o *Observer) SnapshotSaved(_ string, bytes int, err error) {
	o.m.SnapshotBytes.Observe(float64(bytes))
	if err != nil {
		o.m.SnapshotFailures.Inc()
	}
}

// RunContext implements [runner.Observer]: the run's context carries its
// turn span, which exec agents receive as traceparent, and a sink that logs
// the agent's stderr: at debug after every run, at warn when it failed.
func (o *Observer) RunContext(ctx context.Context, c events.Claim, runID string) context.Context {
	if o.tracer != nil {
		o.mu.Lock()
		t := o.turns[turnKey{c.Thread, c.Seq, runID}]
		o.mu.Unlock()
		if t != nil {
			ctx = trace.ContextWithSpan(ctx, t.span)
		}
	}
	thread := c.Thread
	return agent.WithStderr(ctx, func(stderr string, err error) {
		switch {
		case stderr == "":
		case err != nil:
			o.log.Warn("agent stderr of a failed run", "thread", thread, "run", runID, "stderr", stderr)
		default:
			o.log.Debug("agent stderr", "thread", thread, "run", runID, "stderr", stderr)
		}
	})
}

// Appending implements [runner.Observer]. What an append's result means
// for a turn is read from the event: run_started starts a turn (or, refused
// by the fence, ends it as refused); run_completed, run_failed and
// run_abandoned end one.
func (o *Observer) Appending(c events.Claim, ev *eventspb.Event, view *projections.Thread) func(events.Ack, error) {
	typ := events.TypeOf(ev)
	var run, outcome, reason string
	switch b := ev.GetBody().(type) {
	case *eventspb.Event_RunStarted:
		return o.startAppend(c, typ, b.RunStarted, view)
	case *eventspb.Event_RunCompleted:
		run, outcome = b.RunCompleted.GetRunId(), OutcomeCompleted
	case *eventspb.Event_RunFailed:
		run, outcome, reason = b.RunFailed.GetRunId(), OutcomeFailed, b.RunFailed.GetReason()
	case *eventspb.Event_RunAbandoned:
		run, outcome, reason = b.RunAbandoned.GetRunId(), OutcomeAbandoned, b.RunAbandoned.GetReason()
	default:
		return func(_ events.Ack, err error) {
			if err != nil {
				o.appendFailed(typ, err)
			}
		}
	}
	prompt := promptOf(view, run)
	k := turnKey{c.Thread, c.Seq, run}
	at := o.now()
	return func(_ events.Ack, err error) {
		if err != nil {
			o.appendFailed(typ, err)
			return
		}
		var t *turn
		if outcome == OutcomeAbandoned {
			// The abandoned run's own span, if any, is its starter's; this
			// one marks, in the poster's trace, where the turn ended.
			t = o.newTurn(k, prompt, at)
		} else {
			t = o.takeTurn(k)
		}
		o.turnEnded(k, outcome, prompt, t, reason)
	}
}

// startAppend observes a run_started: its turn span starts now.
func (o *Observer) startAppend(c events.Claim, typ events.Type, rs *eventspb.RunStarted, view *projections.Thread) func(events.Ack, error) {
	prompt := messageAt(view, rs.GetPromptSeq())
	k := turnKey{c.Thread, c.Seq, rs.GetRunId()}
	t := o.openTurn(k, prompt)
	return func(_ events.Ack, err error) {
		if err == nil {
			o.m.RunStartLatency.Observe(o.since(prompt.Posted))
			return
		}
		o.appendFailed(typ, err)
		if errors.Is(err, events.ErrThreadBusy) {
			// ADR-0069: a run whose start is refused is a failed turn.
			o.takeTurn(k)
			o.turnEnded(k, OutcomeRefused, prompt, t, err.Error())
		}
		// Otherwise the outcome is unknown: the run may have started, and
		// its span stays open until its end or its claim's.
	}
}

// openTurn starts the span of run's turn, or returns the one already open
// (a retried run_started has the same run id). nil when tracing is off.
func (o *Observer) openTurn(k turnKey, prompt promptInfo) *turn {
	if o.tracer == nil {
		return nil
	}
	o.mu.Lock()
	t := o.turns[k]
	o.mu.Unlock()
	if t != nil {
		return t
	}
	t = o.newTurn(k, prompt, o.now())
	o.mu.Lock()
	o.turns[k] = t
	o.mu.Unlock()
	return t
}

// newTurn starts a turn span at start, as a child of the span whose trace
// context the prompt's post carried. nil when tracing is off.
func (o *Observer) newTurn(k turnKey, prompt promptInfo, start time.Time) *turn {
	if o.tracer == nil {
		return nil
	}
	parent := context.Background()
	if prompt.TraceParent != "" {
		parent = propagation.TraceContext{}.Extract(parent, propagation.MapCarrier{events.HeaderTraceParent: prompt.TraceParent})
	}
	_, span := o.tracer.Start(parent, "turn",
		trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			AttrThread.String(k.thread), AttrRunID.String(k.run),
			AttrClaimSeq.Int64(int64(k.claimSeq)), AttrPrompt.Int64(int64(prompt.Seq)),
		))
	return &turn{span: span}
}

// takeTurn removes and returns run's open turn span, nil if none.
func (o *Observer) takeTurn(k turnKey) *turn {
	if o.tracer == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	t := o.turns[k]
	delete(o.turns, k)
	return t
}

// turnEnded counts, ends the span of, and logs a turn's end.
func (o *Observer) turnEnded(k turnKey, outcome string, prompt promptInfo, t *turn, reason string) {
	d := o.since(prompt.Posted)
	o.turnsBy(outcome).Inc()
	if !prompt.Posted.IsZero() {
		o.m.TurnDuration.Observe(d)
	}
	reason = truncate(reason, maxReasonBytes)
	if t != nil {
		t.span.SetAttributes(AttrOutcome.String(outcome))
		if outcome != OutcomeCompleted {
			t.span.SetStatus(codes.Error, reason)
		}
		t.span.End()
	}
	if !o.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	attrs := []any{"thread", k.thread, "run", k.run, "outcome", outcome, "duration", time.Duration(d * float64(time.Second)).Round(time.Millisecond)}
	if reason != "" {
		attrs = append(attrs, "reason", reason)
	}
	o.log.Info("run ended", attrs...)
}

// appendFailed counts a failed append, and a fenced one the fence refused.
func (o *Observer) appendFailed(typ events.Type, err error) {
	o.m.AppendErrors.WithLabelValues(o.errorCode(err)).Inc()
	if typ.Fenced() && errors.Is(err, events.ErrThreadBusy) {
		o.m.FencedRefusals.Inc()
	}
}

// since returns the seconds from t to now, 0 for a zero t or a clock behind
// it.
func (o *Observer) since(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return max(o.now().Sub(t).Seconds(), 0)
}

// errorCode is an append error's code label: the store's error code (see
// [Config.ErrorCode]) when the error carries one, else its class.
func (o *Observer) errorCode(err error) string {
	if o.errCode != nil {
		if code, ok := o.errCode(err); ok {
			return strconv.Itoa(code)
		}
	}
	switch {
	case errors.Is(err, events.ErrThreadBusy):
		return "thread_busy"
	case errors.Is(err, events.ErrConflict):
		return "conflict"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, events.ErrUnavailable), errors.Is(err, events.ErrClosed):
		return "unavailable"
	case errors.Is(err, events.ErrInvalidEvent), errors.Is(err, events.ErrInvalidThreadID):
		return "invalid"
	case errors.Is(err, events.ErrTooLarge):
		return "too_large"
	}
	return "unknown"
}

// promptInfo is what a turn needs of its prompt message: small, as closures
// keep it.
type promptInfo struct {
	Seq         uint64
	Posted      time.Time // zero when unknown
	TraceParent string
}

// messageAt returns what view holds of the message with sequence seq.
func messageAt(view *projections.Thread, seq uint64) promptInfo {
	if view != nil {
		if i, ok := slices.BinarySearchFunc(view.Messages, seq, func(m projections.Message, s uint64) int {
			return cmp.Compare(m.Seq, s)
		}); ok {
			m := &view.Messages[i]
			return promptInfo{Seq: m.Seq, Posted: m.Posted, TraceParent: m.TraceParent}
		}
	}
	return promptInfo{Seq: seq}
}

// promptOf returns the prompt of run in view.
func promptOf(view *projections.Thread, run string) promptInfo {
	if view == nil {
		return promptInfo{}
	}
	r := view.ActiveRun
	if r == nil || r.ID != run {
		r = nil
		for i := len(view.Runs) - 1; i >= 0 && r == nil; i-- {
			if view.Runs[i].ID == run {
				r = view.Runs[i]
			}
		}
	}
	if r == nil {
		return promptInfo{}
	}
	if p := messageAt(view, r.PromptSeq); !p.Posted.IsZero() {
		return p
	}
	// A compact view forgot the consumed prompt; its run kept what a turn
	// needs of it.
	return promptInfo{Seq: r.PromptSeq, Posted: r.PromptPosted, TraceParent: r.PromptTraceParent}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
