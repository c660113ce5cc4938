//go:build unix

package exec_test

import (
	"context"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/agent/agenttest"
)

// The turn line carries the W3C trace context of the run's span, so the
// program's own spans join the turn's trace (PROTOCOL.md).
func TestExec_Run_turnLineTraceParent(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled,
	}))
	want := `{"type":"turn","protocol":3,"token":{"thread":"t1","claim_seq":1,"run_id":"run-1"},` +
		`"prompt":{"seq":1,"id":"m1","author":"user","text":"hi","role":"user"},"history":[],` +
		`"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`
	e := sh(`read -r turn; if [ "$turn" = '` + want + `' ]; then
		echo '{"type":"done","output":"ok"}'
	else
		echo "got $turn" >&2; exit 1
	fi`)
	r := run(ctx, e, agenttest.NewTurn("hi"))
	if r.err != nil || r.out != "ok" {
		t.Fatalf("output %q err %v", r.out, r.err)
	}
}

// stderrSink records what WithStderr's func receives.
type stderrSink struct {
	mu     sync.Mutex // protects the fields below
	calls  int
	stderr string
	err    error
}

func (s *stderrSink) ctx(ctx context.Context) context.Context {
	return agent.WithStderr(ctx, func(stderr string, err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.calls++
		s.stderr, s.err = stderr, err
	})
}

// Every run hands the program's stderr to the context's sink, with the run's
// error: nil when it completed.
func TestExec_Run_stderrReported(t *testing.T) {
	var ok stderrSink
	r := run(ok.ctx(t.Context()), sh(`read -r turn; echo "thinking" >&2; echo '{"type":"done","output":"fine"}'`), agenttest.NewTurn("hi"))
	if r.err != nil || r.out != "fine" {
		t.Fatalf("output %q err %v", r.out, r.err)
	}
	if ok.calls != 1 || ok.stderr != "thinking\n" || ok.err != nil {
		t.Fatalf("sink got %d calls, stderr %q, err %v; want 1, \"thinking\\n\", nil", ok.calls, ok.stderr, ok.err)
	}
	var failed stderrSink
	r = run(failed.ctx(t.Context()), sh(`read -r turn; echo "boom" >&2; exit 3`), agenttest.NewTurn("hi"))
	if r.err == nil {
		t.Fatal("run succeeded, want exit 3 to fail it")
	}
	if failed.calls != 1 || failed.stderr != "boom\n" || failed.err == nil {
		t.Fatalf("sink got %d calls, stderr %q, err %v; want 1, \"boom\\n\", an error", failed.calls, failed.stderr, failed.err)
	}
}
