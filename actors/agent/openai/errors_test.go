package openai_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/agent/agenttest"
	"github.com/artifactr/artifactr/actors/agent/openai"
	"github.com/artifactr/artifactr/internal/testkit"
)

const rateLimited = `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`

// waits records the waits the agent asks for between retries, and waits
// none of them.
type waits struct {
	mu sync.Mutex // protects d
	d  []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.d = append(w.d, d)
	return ctx.Err() == nil
}

func (w *waits) get() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.d...)
}

// fakeNow is the clock the Retry-After dates are read against.
var fakeNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// A 429 is retried after its Retry-After, in seconds or as an HTTP date;
// the stream that finally comes is the run's output, sent once.
func TestAgent_Run_retries429RetryAfter(t *testing.T) {
	f := newFakeServer(t,
		fail(http.StatusTooManyRequests, rateLimited, "Retry-After", "2"),
		fail(http.StatusTooManyRequests, rateLimited, "Retry-After", fakeNow.Add(3*time.Second).Format(http.TimeFormat)),
		fail(http.StatusTooManyRequests, rateLimited, "Retry-After-Ms", "250", "Retry-After", "1"),
		streamText("at last"),
	)
	a := newAgent(t, f, openai.Config{})
	var w waits
	openai.SetClock(a, func() time.Time { return fakeNow }, w.sleep)
	turn := agenttest.NewTurn("hi")
	if _, err := a.Run(runCtx(t), turn); err != nil {
		t.Fatal(err)
	}
	if got, want := w.get(), []time.Duration{2 * time.Second, 3 * time.Second, 250 * time.Millisecond}; !slices.Equal(got, want) {
		t.Errorf("waits = %v, want %v", got, want)
	}
	if n := len(f.requests()); n != 4 {
		t.Errorf("%d requests, want 4", n)
	}
	if got := turn.Outputs(); !slices.Equal(got, []string{"at last"}) {
		t.Errorf("outputs = %q", got)
	}
}

// Without Retry-After the waits double from 0.5 s, capped at MaxRetryWait;
// after MaxRetries retries the run fails with the status and the server's
// message.
func TestAgent_Run_429GivesUp(t *testing.T) {
	f := newFakeServer(t, fail(http.StatusTooManyRequests, rateLimited))
	a := newAgent(t, f, openai.Config{MaxRetries: 3, MaxRetryWait: 1500 * time.Millisecond})
	var w waits
	openai.SetClock(a, func() time.Time { return fakeNow }, w.sleep)
	_, err := a.Run(runCtx(t), agenttest.NewTurn("hi"))
	if err == nil {
		t.Fatal("Run succeeded against a server that only says 429")
	}
	for _, want := range []string{"openai: POST ", "429 Too Many Requests", "Rate limit reached for requests", "code rate_limit_exceeded", "gave up after 3 retries"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v; want it to say %q", err, want)
		}
	}
	if got, want := w.get(), []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond}; !slices.Equal(got, want) {
		t.Errorf("waits = %v, want %v", got, want)
	}
	if n := len(f.requests()); n != 4 {
		t.Errorf("%d requests, want 4", n)
	}
}

// A Retry-After beyond MaxRetryWait fails the run at once, saying so.
func TestAgent_Run_429RetryAfterTooLong(t *testing.T) {
	f := newFakeServer(t, fail(http.StatusTooManyRequests, rateLimited, "Retry-After", "3600"))
	a := newAgent(t, f, openai.Config{MaxRetryWait: time.Minute})
	var w waits
	openai.SetClock(a, func() time.Time { return fakeNow }, w.sleep)
	_, err := a.Run(runCtx(t), agenttest.NewTurn("hi"))
	if err == nil || !strings.Contains(err.Error(), "retry after 1h0m0s, over the 1m0s limit") {
		t.Fatalf("err = %v", err)
	}
	if len(w.get()) != 0 || len(f.requests()) != 1 {
		t.Errorf("waited %v over %d requests; want no wait and one request", w.get(), len(f.requests()))
	}
}

// A cancel while waiting to retry ends the run at once (the real wait).
func TestAgent_Run_cancelWhileWaitingToRetry(t *testing.T) {
	f := newFakeServer(t, fail(http.StatusTooManyRequests, rateLimited, "Retry-After", "30"))
	a := newAgent(t, f, openai.Config{})
	ctx, cancel := context.WithCancel(runCtx(t))
	done := make(chan error, 1)
	go func() {
		_, err := a.Run(ctx, agenttest.NewTurn("hi"))
		done <- err
	}()
	testkit.CheckFor(t, testTimeout, func() error {
		if n := len(f.requests()); n != 1 {
			return fmt.Errorf("%d requests, want 1", n)
		}
		return nil
	})
	cancel()
	err := waitRun(t, done)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "429") {
		t.Fatalf("err = %v; want context.Canceled, saying it was waiting after a 429", err)
	}
}

// A non-2xx answer fails the run with the status and the server's message,
// whatever shape of error body the server uses; a 4xx is not retried.
func TestAgent_Run_non2xx(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"openai", http.StatusUnauthorized, `{"error":{"message":"Incorrect API key provided: sk-x.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			"401 Unauthorized: Incorrect API key provided: sk-x. (type invalid_request_error, code invalid_api_key)"},
		{"ollama", http.StatusNotFound, `{"error":{"message":"model \"llama9\" not found, try pulling it first","type":"api_error","param":null,"code":null}}`,
			`404 Not Found: model "llama9" not found, try pulling it first (type api_error)`},
		{"ollama native", http.StatusBadRequest, `{"error":"llama3.2 does not support tools"}`, "400 Bad Request: llama3.2 does not support tools"},
		{"vllm", http.StatusBadRequest, `{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}`,
			"400 Bad Request: This model's maximum context length is 4096 tokens."},
		{"fastapi", http.StatusUnprocessableEntity, `{"detail":[{"loc":["body","model"],"msg":"field required"}]}`, `422 Unprocessable Entity: [{"loc"`},
		{"plain text 500", http.StatusInternalServerError, "upstream exploded\n", "500 Internal Server Error: upstream exploded"},
		{"empty", http.StatusForbidden, "", "403 Forbidden: (empty body)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, fail(tc.status, tc.body))
			a := newAgent(t, f, openai.Config{MaxRetries: -1})
			_, err := a.Run(runCtx(t), agenttest.NewTurn("hi"))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "openai: POST "+f.url()+"/chat/completions: ") {
				t.Fatalf("err = %v\nwant it to contain %q", err, tc.want)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

// A stream that breaks the format fails the run with a clear reason; the
// text streamed before the break is kept as output.
func TestAgent_Run_malformedStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    handler
		want string
	}{
		{"bad json", func(w http.ResponseWriter, r *http.Request, n int) {
			s := startStream(w)
			s.content("before")
			s.raw("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]\n\n")
			s.finish("stop")
		}, `malformed stream event 2: "{\"choices\":[{\"delta\":{\"content\":\"x\"}}]": unexpected end of JSON input`},
		{"no done", func(w http.ResponseWriter, r *http.Request, n int) {
			s := startStream(w)
			s.content("before")
			s.data(chunkJSON(map[string]any{}, nil)) // no finish_reason
		}, "stream ended before data: [DONE] (truncated)"},
		{"cut mid-event", func(w http.ResponseWriter, r *http.Request, n int) {
			s := startStream(w)
			s.content("before")
			s.raw(`data: {"choices":[{"index":0,"delta":{"cont`)
		}, `malformed stream event 2: "{\"choices\":[{\"index\":0,\"delta\":{\"cont"`},
		{"connection cut", func(w http.ResponseWriter, r *http.Request, n int) {
			s := startStream(w)
			s.content("before")
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			// Half a chunk of the chunked body, then the socket closes.
			buf.WriteString("40\r\ndata: {\"choices\"")
			buf.Flush()
			conn.Close()
		}, "unexpected EOF"},
		{"error in stream", func(w http.ResponseWriter, r *http.Request, n int) {
			s := startStream(w)
			s.content("before")
			s.raw(`data: {"error":{"message":"The server had an error while processing your request.","type":"server_error"}}` + "\n\n")
		}, "server error in stream: The server had an error while processing your request. (type server_error)"},
		{"llama.cpp error line", func(w http.ResponseWriter, r *http.Request, n int) {
			s := startStream(w)
			s.content("before")
			s.raw(`error: {"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}` + "\n\n")
		}, "server error in stream: the request exceeds the available context size"},
		{"vllm error object", func(w http.ResponseWriter, r *http.Request, n int) {
			s := startStream(w)
			s.content("before")
			s.raw(`data: {"object":"error","message":"Engine loop has died","type":"InternalServerError","param":null,"code":500}` + "\n\n")
			s.raw("data: [DONE]\n\n")
		}, "server error in stream: Engine loop has died"},
		{"not an event stream", func(w http.ResponseWriter, r *http.Request, n int) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"whole"}}]}`))
		}, "with application/json, not an event stream"},
		{"tool index out of range", func(w http.ResponseWriter, r *http.Request, n int) {
			s := startStream(w)
			s.content("before")
			s.toolDelta(1000000, "c", "ask_user", "{}")
			s.finish("tool_calls")
		}, "tool call index 1000000 out of range"},
		{"line too long", func(w http.ResponseWriter, r *http.Request, n int) {
			s := startStream(w)
			s.content("before")
			s.raw("data: " + strings.Repeat("x", 5<<20))
		}, "stream line longer than 4194304 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, tc.h)
			a := newAgent(t, f, openai.Config{FlushInterval: time.Hour})
			turn := agenttest.NewTurn("hi")
			_, err := a.Run(runCtx(t), turn)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "openai: ") {
				t.Fatalf("err = %v\nwant it to contain %q", err, tc.want)
			}
			if tc.name != "not an event stream" && !slices.Equal(turn.Outputs(), []string{"before"}) {
				t.Errorf("outputs = %q; want the text before the break kept", turn.Outputs())
			}
		})
	}
}

// Comments, other SSE fields, data without a space, multi-line data and a
// [DONE] not followed by a blank line are all the standard format.
func TestAgent_Run_streamVariants(t *testing.T) {
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startStream(w)
		s.raw(": OPENROUTER PROCESSING\n\n")
		s.raw("event: message\nid: 1\nretry: 100\ndata:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n")
		s.raw("data: {\"choices\":[{\"index\":0,\ndata: \"delta\":{\"content\":\"b\"}}]}\r\n\r\n")
		s.raw("data: {\"choices\":[],\"usage\":{\"total_tokens\":3},\"error\":null}\n\n")
		s.raw("data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"other choice\"}}]}\n\n")
		s.raw("data: [DONE]")
	})
	a := newAgent(t, f, openai.Config{FlushInterval: time.Hour})
	turn := agenttest.NewTurn("hi")
	if _, err := a.Run(runCtx(t), turn); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(turn.Outputs(), ""); got != "ab" {
		t.Fatalf("outputs = %q, want \"ab\"", got)
	}
}

// A cancel in mid-stream returns promptly with the context's error, the
// text streamed so far emitted, and the server sees its connection closed.
func TestAgent_Run_cancelMidStream(t *testing.T) {
	disconnected := make(chan struct{})
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startStream(w)
		s.content("partial")
		<-r.Context().Done() // held open until the client goes away
		close(disconnected)
	})
	a := newAgent(t, f, openai.Config{FlushInterval: time.Millisecond})
	ctx, cancel := context.WithCancel(runCtx(t))
	turn := agenttest.NewTurn("hi")
	done := make(chan error, 1)
	go func() {
		_, err := a.Run(ctx, turn)
		done <- err
	}()
	if _, err := turn.WaitOutputs(runCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	err := waitRun(t, done)
	if !errors.Is(err, context.Canceled) || err.Error() != "openai: context canceled" {
		t.Fatalf("err = %v; want openai: context canceled", err)
	}
	select {
	case <-disconnected:
	case <-time.After(testTimeout):
		t.Fatal("the server still holds the connection: the body was not closed")
	}
	if got := turn.Outputs(); !slices.Equal(got, []string{"partial"}) {
		t.Errorf("outputs = %q", got)
	}
}

// The run's end (agent.ErrRunEnded from Emit, as when the runner cancelled
// it) fails the run too.
func TestAgent_Run_emitFails(t *testing.T) {
	f := newFakeServer(t, streamText("x"))
	a := newAgent(t, f, openai.Config{})
	turn := agenttest.NewTurn("hi")
	turn.End()
	_, err := a.Run(runCtx(t), turn)
	if !errors.Is(err, agent.ErrRunEnded) {
		t.Fatalf("err = %v", err)
	}
}

// A server silent for IdleTimeout, before its headers or mid-stream, fails
// the run and loses its connection.
func TestAgent_Run_idleTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers bool
	}{{"before headers", false}, {"mid-stream", true}} {
		t.Run(tc.name, func(t *testing.T) {
			disconnected := make(chan struct{})
			f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
				if tc.headers {
					startStream(w).content("tok")
				}
				<-r.Context().Done()
				close(disconnected)
			})
			a := newAgent(t, f, openai.Config{IdleTimeout: 50 * time.Millisecond})
			_, err := a.Run(runCtx(t), agenttest.NewTurn("hi"))
			if err == nil || !strings.Contains(err.Error(), "no data from "+f.url()+"/chat/completions for 50ms (serve --openai-idle-timeout)") {
				t.Fatalf("err = %v", err)
			}
			<-disconnected
		})
	}
}

// A stream that keeps sending but outlasts RequestTimeout fails the run:
// only silence is idleness.
func TestAgent_Run_requestTimeout(t *testing.T) {
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startStream(w)
		tick := time.NewTicker(5 * time.Millisecond) // pacing of the fake server, not a wait of the test
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				s.content(".")
			}
		}
	})
	// The stream outlives IdleTimeout three times; a stall of the fake
	// server as long as IdleTimeout would fail the test, hence its margin.
	a := newAgent(t, f, openai.Config{RequestTimeout: 1500 * time.Millisecond, IdleTimeout: 500 * time.Millisecond})
	turn := agenttest.NewTurn("hi")
	_, err := a.Run(runCtx(t), turn)
	if err == nil || !strings.Contains(err.Error(), "timed out after 1.5s (serve --openai-timeout)") {
		t.Fatalf("err = %v", err)
	}
	if len(turn.Outputs()) == 0 {
		t.Error("no output streamed before the timeout")
	}
}

// A server that is not there fails the run with the dial error.
func TestAgent_Run_noServer(t *testing.T) {
	f := newFakeServer(t, streamText("x"))
	a := newAgent(t, f, openai.Config{})
	f.srv.Close()
	_, err := a.Run(runCtx(t), agenttest.NewTurn("hi"))
	if err == nil || !strings.Contains(err.Error(), "openai: POST "+f.url()+"/chat/completions: ") || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("err = %v", err)
	}
}

// waitRun waits for a run to return; its bound only turns a hang into a
// failure.
func waitRun(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(testTimeout):
		t.Fatalf("Run did not return within %s of its cancel", testTimeout)
		return nil
	}
}

func ptr[T any](v T) *T { return &v }
