package openai_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/agent/agenttest"
	"github.com/artifactr/artifactr/actors/agent/openai"
	"github.com/artifactr/artifactr/internal/testkit"
)

// logTo returns a logger writing text lines to a buffer.
func logTo() (*slog.Logger, *testkit.SyncBuffer) {
	var b testkit.SyncBuffer
	return slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelInfo})), &b
}

// Issue 22: a stream that ends after its finish_reason, without data:
// [DONE], completes the run, with a warning.
func TestAgent_Run_finishReasonWithoutDone(t *testing.T) {
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startStream(w)
		s.content("the whole ")
		s.content("answer")
		s.data(chunkJSON(map[string]any{}, ptr("stop"))) // and the connection ends
	})
	log, buf := logTo()
	a := newAgent(t, f, openai.Config{Logger: log})
	turn := agenttest.NewTurn("hi")
	if _, err := a.Run(runCtx(t), turn); err != nil {
		t.Fatalf("run: %v", err)
	}
	if got := strings.Join(turn.Outputs(), ""); got != "the whole answer" {
		t.Errorf("outputs %q", got)
	}
	if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "without data: [DONE]") {
		t.Errorf("no warning logged:\n%s", buf.String())
	}
}

// Issue 22: each retry is logged at WARN, with the status and the wait.
func TestAgent_Run_retriesLogged(t *testing.T) {
	f := newFakeServer(t,
		fail(http.StatusInternalServerError, `{"error":{"message":"overloaded"}}`),
		fail(http.StatusTooManyRequests, rateLimited, "Retry-After", "2"),
		streamText("ok"),
	)
	log, buf := logTo()
	a := newAgent(t, f, openai.Config{Logger: log})
	var w waits
	openai.SetClock(a, func() time.Time { return fakeNow }, w.sleep)
	if _, err := a.Run(runCtx(t), agenttest.NewTurn("hi")); err != nil {
		t.Fatal(err)
	}
	var warns []string
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "retrying") {
			warns = append(warns, l)
		}
	}
	if len(warns) != 2 || !strings.Contains(warns[0], "status=500") || !strings.Contains(warns[0], "retry=1") ||
		!strings.Contains(warns[1], "status=429") || !strings.Contains(warns[1], "in=2s") {
		t.Errorf("retry warnings:\n%s", strings.Join(warns, "\n"))
	}
}

// Issue 22: reasons name the serve flag that sets a limit, not a Go field.
func TestAgent_Run_reasonsNameFlags(t *testing.T) {
	f := newFakeServer(t, fail(http.StatusTooManyRequests, rateLimited, "Retry-After", "3600"))
	a := newAgent(t, f, openai.Config{MaxRetryWait: time.Minute})
	openai.SetClock(a, func() time.Time { return fakeNow }, (&waits{}).sleep)
	_, err := a.Run(runCtx(t), agenttest.NewTurn("hi"))
	if err == nil || !strings.Contains(err.Error(), "(serve --openai-max-retry-wait)") {
		t.Errorf("retry wait: err = %v", err)
	}

	f = newFakeServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startStream(w)
		s.toolDelta(0, "c", "nope", `{}`)
		s.finish("tool_calls")
	})
	a = newAgent(t, f, openai.Config{MaxToolRounds: 2})
	_, err = a.Run(runCtx(t), agenttest.NewTurn("q"))
	if err == nil || !strings.Contains(err.Error(), "(serve --openai-max-tool-rounds)") {
		t.Errorf("tool rounds: err = %v", err)
	}
}

// Probe finds a server that does not answer, a refused key and a model
// the server does not list; any other answer passes.
func TestAgent_Probe(t *testing.T) {
	models := `{"object":"list","data":[{"id":"llama3.2","object":"model"},{"id":"qwen3","object":"model"}]}`
	for _, tc := range []struct {
		name   string
		status int
		body   string
		model  string
		want   string // in the error; "" for none
	}{
		{"listed", 200, models, "llama3.2", ""},
		{"not listed", 200, models, "gpt-9", `lists no model "gpt-9" (it has [llama3.2 qwen3])`},
		{"no /models", 404, "not found", "m", ""},
		{"key refused", 401, `{"error":{"message":"Incorrect API key provided"}}`, "m", "401 Unauthorized: Incorrect API key provided (check OPENAI_API_KEY)"},
		{"not a list", 200, "<html>", "m", ""},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.URL.Path != "/v1/models" || r.Header.Get("Authorization") != "Bearer k" {
					http.Error(w, fmt.Sprintf("unexpected %s %s", r.Method, r.URL.Path), http.StatusTeapot)
					return
				}
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			a, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: tc.model, APIKey: "k", HTTPClient: srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			err = a.Probe(t.Context())
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Probe: %v, want %q", err, tc.want)
			}
		})
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	a, err := openai.New(openai.Config{BaseURL: url + "/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := a.Probe(ctx); err == nil || !strings.Contains(err.Error(), url+"/v1 does not answer") {
		t.Errorf("Probe of a closed port: %v", err)
	}
}
