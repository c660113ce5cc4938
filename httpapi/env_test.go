package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/httpapi"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections/summaries"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is an embedded NATS server with a runner (assistants echo, slow, an
// echo that keeps each run active 400 ms, and hold, one that keeps it
// active until it is cancelled or interrupted), the summaries projector, and
// the API on an httptest server.
type env struct {
	t      *testing.T
	url    string
	nats   string // the NATS server's URL
	store  *natsstore.Store
	api    *httpapi.Server
	client *client.Client
}

func newEnv(t *testing.T, tokens map[string]httpapi.Role) *env {
	t.Helper()
	srv := natsembedtest.RunForTest(t)
	ctx := context.Background()
	store, err := natsstore.New(ctx, natsstore.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.NewAssistants("echo", map[string]agent.Agent{
		"echo": agent.Echo{}, "slow": agent.Echo{Delay: 400 * time.Millisecond},
		"hold": agent.Echo{Delay: time.Hour}, // active until cancelled or interrupted
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Config{Store: store, Agent: ag, ID: "httpapi-test", IdleTimeout: time.Hour,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := summaries.NewProjector(summaries.Config{Store: store, Owner: "test", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	pctx, stopP := context.WithCancel(ctx)
	pdone := make(chan struct{})
	go func() { defer close(pdone); _ = p.Run(pctx) }()
	c, err := client.Dial(ctx, client.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.New(httpapi.Config{Client: c, Default: "echo", Tokens: tokens, MaxBody: 64 << 10,
		Assistants: []httpapi.Assistant{{GraphID: "echo", Kind: "echo"}, {GraphID: "slow", Kind: "echo"}, {GraphID: "hold", Kind: "echo"}}})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the summaries read model", func() (bool, string) {
		_, err := c.Summaries(ctx, summaries.DefaultBucket)
		return err == nil, fmt.Sprint(err)
	})
	hs := httptest.NewServer(api)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		api.Close()
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		_ = r.Stop(sctx)
		stopP()
		<-pdone
		c.Close()
		store.Close()
	})
	return &env{t: t, url: hs.URL, nats: srv.ClientURL(), store: store, api: api, client: c}
}

// do sends a request and returns the status and the body.
func (e *env) do(method, path, body string, hdr ...string) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// json sends a request that must answer want, and decodes the body into v.
func (e *env) json(method, path, body string, want int, v any) {
	e.t.Helper()
	code, b := e.do(method, path, body)
	if code != want {
		e.t.Fatalf("%s %s %s: status %d, want %d: %s", method, path, body, code, want, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			e.t.Fatalf("%s %s: body %s: %v", method, path, b, err)
		}
	}
}

func (e *env) lastSeq() uint64 {
	e.t.Helper()
	n, err := e.store.LastStreamSeq(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) newThread() string {
	e.t.Helper()
	var th struct {
		ThreadID string `json:"thread_id"`
	}
	e.json("POST", "/threads", `{"metadata":{}}`, 200, &th)
	return th.ThreadID
}

// sse is one parsed SSE event.
type sse struct {
	ID, Event string
	Data      json.RawMessage
}

// readSSE parses an SSE body until it ends, checking the framing: each
// event is id, event and one data line, then a blank line; comments are
// skipped.
func readSSE(t *testing.T, r io.Reader, stop func(sse) bool) []sse {
	t.Helper()
	var out []sse
	var cur sse
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Event == "" {
				continue
			}
			out = append(out, cur)
			if stop != nil && stop(cur) {
				return out
			}
			cur = sse{}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			cur.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.Event = line[7:]
		case strings.HasPrefix(line, "data: "):
			if cur.Data != nil {
				t.Fatalf("two data lines in one event: %q", line)
			}
			cur.Data = json.RawMessage(line[6:])
			if !json.Valid(cur.Data) {
				t.Fatalf("data is not JSON: %q", line)
			}
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return out
}

// stream posts body to path and returns the response (the caller closes
// it).
func (e *env) stream(method, path, body string, hdr ...string) *http.Response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		e.t.Fatalf("%s %s: %d %s: %s", method, path, res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	return res
}
