package openai_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/agent/agenttest"
	"github.com/artifactr/artifactr/actors/agent/openai"
)

// testTimeout bounds a wait in a test that fails otherwise; no test
// expects to use it up.
const testTimeout = 10 * time.Second

// newAgent makes an agent for f, with cfg's fields over test defaults.
func newAgent(t *testing.T, f *fakeServer, cfg openai.Config) *openai.Agent {
	t.Helper()
	cfg.BaseURL = f.url()
	if cfg.Model == "" {
		cfg.Model = "fake-model"
	}
	cfg.HTTPClient = f.srv.Client() // closed with the server: no idle connection outlives the test
	a, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func runCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// Every streamed token reaches run_output, in order, coalesced up to
// FlushBytes; Run returns an empty final output, so no text is recorded
// twice.
func TestAgent_Run_streamsInOrderCoalesced(t *testing.T) {
	var parts []string
	for i := range 200 {
		parts = append(parts, string(rune('a'+i%26))+"é ")
	}
	f := newFakeServer(t, streamText(parts...))
	// An interval that never fires, so only the size coalesces.
	a := newAgent(t, f, openai.Config{FlushInterval: time.Hour, FlushBytes: 64})
	turn := agenttest.NewTurn("say the alphabet")
	out, err := a.Run(runCtx(t), turn)
	if err != nil {
		t.Fatal(err)
	}
	if out != "" {
		t.Errorf("Run returned %q; want \"\": the text is already in run_output", out)
	}
	outs := turn.Outputs()
	if got, want := strings.Join(outs, ""), strings.Join(parts, ""); got != want {
		t.Fatalf("outputs joined = %q\nwant %q", got, want)
	}
	for i, o := range outs {
		if i < len(outs)-1 && len(o) < 64 {
			t.Errorf("output %d is %d bytes (%q); want each but the last to reach FlushBytes 64", i, len(o), o)
		}
		if len(o) >= 64+len(parts[0]) {
			t.Errorf("output %d is %d bytes; want it emitted as soon as it reached 64", i, len(o))
		}
	}
	if n := len(outs); n < 10 || n > 16 {
		t.Errorf("%d outputs for %d bytes at 64 bytes each; want about 12", n, len(strings.Join(parts, "")))
	}
}

// Buffered text is emitted FlushInterval after it arrived, with no more
// bytes to push it: the server holds the stream until the test has seen
// the first token emitted.
func TestAgent_Run_flushesOnInterval(t *testing.T) {
	release := make(chan struct{})
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startStream(w)
		s.content("first")
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		s.content(" second")
		s.finish("stop")
	})
	a := newAgent(t, f, openai.Config{FlushInterval: 10 * time.Millisecond, FlushBytes: 1 << 20})
	turn := agenttest.NewTurn("hi")
	done := make(chan error, 1)
	go func() {
		_, err := a.Run(runCtx(t), turn)
		done <- err
	}()
	got, err := turn.WaitOutputs(runCtx(t), 1)
	close(release)
	if err != nil {
		t.Fatalf("the first token was not emitted on its own: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := []string{"first", " second"}; !slices.Equal(got[:1], want[:1]) || !slices.Equal(turn.Outputs(), want) {
		t.Fatalf("outputs = %q, then %q; want %q", got, turn.Outputs(), want)
	}
}

// The request carries the model, stream: true, the API key, the ask_user
// tool, and the conversation: system prompt, history with roles by author,
// then the prompt.
func TestAgent_Run_request(t *testing.T) {
	f := newFakeServer(t, streamText("ok"))
	a := newAgent(t, f, openai.Config{Model: "llama3.2", APIKey: "sk-test", System: "Be brief."})
	turn := agenttest.NewTurn("and now?")
	turn.Msg.Author = "alice"
	turn.Hist = []agent.Message{
		{Seq: 1, Author: "alice", Text: "hello"},
		{Seq: 2, Author: "assistant", Text: "hi alice"},
		{Seq: 3, Author: "bob smith", Text: "me too"},
		{Seq: 4, Author: "", Text: ""},
	}
	if _, err := a.Run(runCtx(t), turn); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q", got)
	}
	if got := r.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}
	if r.Body.Model != "llama3.2" || !r.Body.Stream {
		t.Errorf("model %q, stream %v", r.Body.Model, r.Body.Stream)
	}
	if len(r.Body.Tools) != 1 || r.Body.Tools[0].Type != "function" || r.Body.Tools[0].Function.Name != "ask_user" ||
		!strings.Contains(string(r.Body.Tools[0].Function.Parameters), `"question"`) {
		t.Errorf("tools = %+v; want ask_user with a question parameter", r.Body.Tools)
	}
	type msg struct{ role, name, content string }
	var got []msg
	for _, m := range r.Body.Messages {
		got = append(got, msg{m.Role, m.Name, *m.Content})
	}
	want := []msg{
		{"system", "", "Be brief."},
		{"user", "alice", "hello"},
		{"assistant", "", "hi alice"},
		{"user", "", "me too"}, // "bob smith" is no valid name
		{"user", "alice", "and now?"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("messages =\n%q\nwant\n%q", got, want)
	}
	if a.Name() != "openai:llama3.2" {
		t.Errorf("Name() = %q", a.Name())
	}
}

// No key, no Authorization header (Ollama needs none); NoTools sends no
// tools.
func TestAgent_Run_noKeyNoTools(t *testing.T) {
	f := newFakeServer(t, streamText("ok"))
	a := newAgent(t, f, openai.Config{NoTools: true})
	if _, err := a.Run(runCtx(t), agenttest.NewTurn("hi")); err != nil {
		t.Fatal(err)
	}
	r := f.requests()[0]
	if h, ok := r.Header["Authorization"]; ok {
		t.Errorf("Authorization sent without a key: %q", h)
	}
	if len(r.Body.Tools) != 0 {
		t.Errorf("tools sent with NoTools: %+v", r.Body.Tools)
	}
}

// A streamed ask_user call, its arguments split over chunks, becomes
// Turn.Ask after the text before it was emitted; the answer goes back as
// the tool's result, and the model's next reply is streamed.
func TestAgent_Run_askUser(t *testing.T) {
	f := newFakeServer(t,
		func(w http.ResponseWriter, r *http.Request, n int) {
			s := startStream(w)
			s.content("Let me ask. ")
			s.toolDelta(0, "call_abc", "ask_user", "")
			s.toolDelta(0, "", "", `{"ques`)
			s.toolDelta(0, "", "", `tion": "Your`)
			s.toolDelta(0, "", "", ` name?"}`)
			s.finish("tool_calls")
		},
		streamText("Hello, ", "Ada."),
	)
	a := newAgent(t, f, openai.Config{FlushInterval: time.Hour})
	turn := agenttest.NewTurn("greet me")
	var atAsk []string
	turn.AnswerFunc = func(ctx context.Context, q string) (agent.Message, error) {
		atAsk = turn.Outputs()
		return agent.Message{Seq: 9, ID: "m9", Author: "user", Text: "Ada"}, nil
	}
	if _, err := a.Run(runCtx(t), turn); err != nil {
		t.Fatal(err)
	}
	if q := turn.Questions(); !slices.Equal(q, []string{"Your name?"}) {
		t.Fatalf("questions = %q", q)
	}
	if !slices.Equal(atAsk, []string{"Let me ask. "}) {
		t.Errorf("outputs when asking = %q; want the text before the call emitted first", atAsk)
	}
	if got := strings.Join(turn.Outputs(), ""); got != "Let me ask. Hello, Ada." {
		t.Errorf("outputs joined = %q", got)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	ms := reqs[1].Body.Messages
	if len(ms) != 3 {
		t.Fatalf("second request has %d messages, want user, assistant, tool: %+v", len(ms), ms)
	}
	as, tr := ms[1], ms[2]
	if as.Role != "assistant" || as.Content == nil || *as.Content != "Let me ask. " || len(as.ToolCalls) != 1 {
		t.Fatalf("assistant message = %+v", as)
	}
	tc := as.ToolCalls[0]
	if tc.ID != "call_abc" || tc.Type != "function" || tc.Function.Name != "ask_user" || tc.Function.Arguments != `{"question": "Your name?"}` {
		t.Errorf("tool call repeated as %+v", tc)
	}
	if tr.Role != "tool" || tr.ToolCallID != "call_abc" || tr.Content == nil || *tr.Content != "Ada" {
		t.Errorf("tool result = %+v; want role tool, tool_call_id call_abc, content Ada", tr)
	}
}

// Servers that send each tool call whole and without an index (as some
// Ollama versions do) get each call asked in turn; an assistant message
// with only tool calls is repeated with content null.
func TestAgent_Run_askUserWholeCalls(t *testing.T) {
	f := newFakeServer(t,
		func(w http.ResponseWriter, r *http.Request, n int) {
			s := startStream(w)
			s.raw(`data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[` +
				`{"id":"c1","type":"function","function":{"name":"ask_user","arguments":"{\"question\":\"first?\"}"}},` +
				`{"id":"c2","type":"function","function":{"name":"ask_user","arguments":"{\"question\":\"second?\"}"}}]},"finish_reason":null}]}` + "\n\n")
			s.finish("tool_calls")
		},
		streamText("done"),
	)
	a := newAgent(t, f, openai.Config{})
	turn := agenttest.NewTurn("q")
	turn.Answer("one")
	turn.Answer("two")
	if _, err := a.Run(runCtx(t), turn); err != nil {
		t.Fatal(err)
	}
	if q := turn.Questions(); !slices.Equal(q, []string{"first?", "second?"}) {
		t.Fatalf("questions = %q", q)
	}
	ms := f.requests()[1].Body.Messages
	if len(ms) != 4 || ms[1].Content != nil || ms[2].ToolCallID != "c1" || *ms[2].Content != "one" || ms[3].ToolCallID != "c2" || *ms[3].Content != "two" {
		t.Errorf("second request's messages = %+v", ms)
	}
}

// A call of an unknown tool, or ask_user without a question, is answered
// with an error for the model to read, not asked; the model then goes on.
func TestAgent_Run_badToolCalls(t *testing.T) {
	f := newFakeServer(t,
		func(w http.ResponseWriter, r *http.Request, n int) {
			s := startStream(w)
			s.toolDelta(0, "c1", "search_web", `{"q":"x"}`)
			s.toolDelta(1, "c2", "ask_user", `{"prompt":"x"}`)
			s.toolDelta(2, "", "ask_user", `not json`)
			s.finish("tool_calls")
		},
		streamText("sorry"),
	)
	a := newAgent(t, f, openai.Config{})
	turn := agenttest.NewTurn("q")
	if _, err := a.Run(runCtx(t), turn); err != nil {
		t.Fatal(err)
	}
	if q := turn.Questions(); len(q) != 0 {
		t.Fatalf("asked %q; want nothing asked", q)
	}
	ms := f.requests()[1].Body.Messages
	if len(ms) != 5 {
		t.Fatalf("second request's messages = %+v", ms)
	}
	for i, want := range []string{`no tool "search_web"`, `ask_user takes {"question"`, `ask_user takes {"question"`} {
		m := ms[2+i]
		if m.Role != "tool" || m.ToolCallID == "" || !strings.Contains(*m.Content, want) {
			t.Errorf("tool result %d = %+v (content %q); want an id and %q", i, m, *m.Content, want)
		}
	}
	if id := ms[1].ToolCalls[2].ID; id == "" || id != ms[4].ToolCallID {
		t.Errorf("a call without an id got id %q, its result %q", id, ms[4].ToolCallID)
	}
}

// A model that calls tools forever is stopped after MaxToolRounds requests.
func TestAgent_Run_maxToolRounds(t *testing.T) {
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startStream(w)
		s.toolDelta(0, "c", "nope", `{}`)
		s.finish("tool_calls")
	})
	a := newAgent(t, f, openai.Config{MaxToolRounds: 3})
	_, err := a.Run(runCtx(t), agenttest.NewTurn("q"))
	if err == nil || !strings.Contains(err.Error(), "after 3 requests in one turn") {
		t.Fatalf("err = %v", err)
	}
	if n := len(f.requests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
}

// A failed Ask (the run ended while waiting) fails the run with it.
func TestAgent_Run_askFails(t *testing.T) {
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startStream(w)
		s.toolDelta(0, "c", "ask_user", `{"question":"?"}`)
		s.finish("tool_calls")
	})
	a := newAgent(t, f, openai.Config{})
	turn := agenttest.NewTurn("q")
	turn.End()
	_, err := a.Run(runCtx(t), turn)
	if !errors.Is(err, agent.ErrRunEnded) || !strings.HasPrefix(err.Error(), "openai: ") {
		t.Fatalf("err = %v; want openai: ... agent.ErrRunEnded", err)
	}
}

func TestNew_invalidConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  openai.Config
		want string
	}{
		{openai.Config{Model: "m"}, "BaseURL is empty"},
		{openai.Config{BaseURL: "localhost:11434/v1", Model: "m"}, "want an http:// or https:// URL"},
		{openai.Config{BaseURL: "ftp://x/v1", Model: "m"}, "want an http:// or https:// URL"},
		{openai.Config{BaseURL: "http://x/v1?key=k", Model: "m"}, "want no query"},
		{openai.Config{BaseURL: "http://u:p@x/v1", Model: "m"}, "want no query, fragment or user info"},
		{openai.Config{BaseURL: "http://x/v1"}, "Model is empty"},
		{openai.Config{BaseURL: "http://x/v1", Model: "m", APIKey: "a\nb"}, "line break"},
		{openai.Config{BaseURL: "http://x/v1", Model: "m", IdleTimeout: -1}, "IdleTimeout -1ns is negative"},
		{openai.Config{BaseURL: "http://x/v1", Model: "m", HTTPClient: &http.Client{Timeout: time.Second}}, "would cut streams"},
	} {
		_, err := openai.New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "openai: ") || strings.Contains(err.Error(), ":p@") {
			t.Errorf("New(%+v) = %v; want an error with %q", tc.cfg, err, tc.want)
		}
	}
	a, err := openai.New(openai.Config{BaseURL: " http://localhost:11434/v1/ ", Model: "m"})
	if err != nil || a.Name() != "openai:m" || a.Steerable() {
		t.Fatalf("New of a valid config: %v", err)
	}
}

// The turn's trace context goes with the request, as W3C traceparent; with
// tracing off there is none.
func TestAgent_Run_traceparent(t *testing.T) {
	f := newFakeServer(t, streamText("ok"))
	a := newAgent(t, f, openai.Config{})
	if _, err := a.Run(runCtx(t), agenttest.NewTurn("hi")); err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	if _, err := a.Run(trace.ContextWithSpanContext(runCtx(t), sc), agenttest.NewTurn("hi")); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if h, ok := reqs[0].Header["Traceparent"]; ok {
		t.Errorf("traceparent %q sent with tracing off", h)
	}
	if got, want := reqs[1].Header.Get("Traceparent"), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"; got != want {
		t.Errorf("traceparent = %q, want %q", got, want)
	}
}
