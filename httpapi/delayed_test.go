package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/httpapi"
	"github.com/artifactr/artifactr/internal/testkit"
)

// delayedServe is one serve's HTTP API in the delayed-post tests: its own
// NATS connection and a clock the test moves.
type delayedServe struct {
	t   *testing.T
	c   *client.Client
	api *httpapi.Server
	hs  *httptest.Server
}

const delayedTestBucket = "delayed_test" // apart from env's own API, which drains the default

func startDelayedServe(t *testing.T, e *env, now func() time.Time) *delayedServe {
	t.Helper()
	c, err := client.Dial(t.Context(), client.Config{URL: e.nats})
	if err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.New(httpapi.Config{Client: c, Default: "echo", DelayedBucket: delayedTestBucket, Now: now,
		Assistants: []httpapi.Assistant{{GraphID: "echo", Kind: "echo"}}})
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	d := &delayedServe{t: t, c: c, api: api, hs: httptest.NewServer(api)}
	t.Cleanup(d.stop)
	return d
}

// stop stops the serve's API as serve's shutdown does; stopping twice is
// fine.
func (d *delayedServe) stop() {
	if d.hs == nil {
		return
	}
	d.hs.CloseClientConnections()
	d.hs.Close()
	d.api.Close()
	d.c.Close()
	d.hs = nil
}

func (d *delayedServe) do(method, path, body string) (int, []byte) {
	d.t.Helper()
	req, err := http.NewRequestWithContext(d.t.Context(), method, d.hs.URL+path, strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

type runBody struct {
	RunID      string `json:"run_id"`
	ThreadID   string `json:"thread_id"`
	Status     string `json:"status"`
	CreatedAt  string `json:"created_at"`
	MessageSeq uint64 `json:"artifactr_message_seq"`
}

func (d *delayedServe) run(method, path, body string) runBody {
	d.t.Helper()
	code, b := d.do(method, path, body)
	if code != http.StatusOK {
		d.t.Fatalf("%s %s %s: %d %s", method, path, body, code, b)
	}
	var r runBody
	if err := json.Unmarshal(b, &r); err != nil {
		d.t.Fatalf("%s %s: %s: %v", method, path, b, err)
	}
	return r
}

// postsOf counts thread's message_posted events carrying message id.
func postsOf(t *testing.T, e *env, thread, id string) int {
	t.Helper()
	envs, err := e.store.Load(t.Context(), thread, 1)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, env := range envs {
		if m := env.Event.GetMessagePosted(); m != nil && m.GetMessageId() == id {
			n++
		}
	}
	return n
}

// TestServer_afterSeconds_survivesRestart: a run created with after_seconds
// is acknowledged once its posts are stored in the delayed-post bucket; a
// serve that stops before it is due loses nothing. The next serve posts
// it when due (at once: its clock is past the due time), under the same run
// id, once, and the runner runs it. Until then the run is pending and its
// message is not in the thread.
func TestServer_afterSeconds_survivesRestart(t *testing.T) {
	e := newEnv(t, nil)
	th := e.newThread()
	base := time.Now()
	var skew atomic.Int64 // how far the serves' clock is ahead of base
	clock := func() time.Time { return base.Add(time.Duration(skew.Load())) }

	a := startDelayedServe(t, e, clock)
	body := `{"assistant_id":"echo","after_seconds":60,"multitask_strategy":"enqueue","input":{"messages":[{"role":"user","content":"later","id":"later-1"}]}}`
	created := a.run("POST", "/threads/"+th+"/runs", body)
	if created.RunID != "later-1" || created.Status != "pending" || created.MessageSeq != 0 {
		t.Fatalf("created %+v; want run later-1, pending, not posted", created)
	}
	// A retried create is the same run, stored once.
	if again := a.run("POST", "/threads/"+th+"/runs", body); again != created {
		t.Fatalf("retried create %+v; want %+v", again, created)
	}
	if got := a.run("GET", "/threads/"+th+"/runs/later-1", ""); got.Status != "pending" || got.CreatedAt != created.CreatedAt {
		t.Fatalf("run before its time: %+v; want pending, created %s", got, created.CreatedAt)
	}
	code, raw := a.do("GET", "/threads/"+th+"/runs", "")
	var listed []runBody
	if err := json.Unmarshal(raw, &listed); code != http.StatusOK || err != nil || len(listed) != 1 || listed[0] != created {
		t.Fatalf("runs list before its time: %d %s; want the pending run", code, raw)
	}
	a.stop() // before the delay is over: a serve held it in memory, lost it
	if n := postsOf(t, e, th, "later-1"); n != 0 {
		t.Fatalf("posted %d times before its time", n)
	}

	// The next serve, its clock past the due time, posts it at once.
	skew.Store(int64(61 * time.Second))
	b := startDelayedServe(t, e, clock)
	testkit.WaitFor(t, 20*time.Second, "the delayed run to complete", func() (bool, string) {
		r := b.run("GET", "/threads/"+th+"/runs/later-1", "")
		return r.Status == "success", fmt.Sprintf("%+v", r)
	})
	got := b.run("GET", "/threads/"+th+"/runs/later-1", "")
	if got.RunID != "later-1" || got.MessageSeq == 0 {
		t.Fatalf("run after the restart: %+v; want run later-1 with its message", got)
	}
	d, found, err := b.c.DelayedPost(t.Context(), delayedTestBucket, th, "later-1")
	if err != nil || !found || d.Posted != got.MessageSeq {
		t.Fatalf("delayed key after the post: %+v found=%v err=%v; want posted at %d", d, found, err, got.MessageSeq)
	}

	// Draining again, and creating again, post nothing more.
	if _, done, err := b.c.PostDue(t.Context(), delayedTestBucket, clock()); err != nil || len(done) != 0 {
		t.Fatalf("a second drain: done %v, err %v; want nothing to do", done, err)
	}
	if again := b.run("POST", "/threads/"+th+"/runs", body); again.RunID != "later-1" || again.MessageSeq != got.MessageSeq {
		t.Fatalf("create after the post: %+v; want run later-1 at %d", again, got.MessageSeq)
	}
	if n := postsOf(t, e, th, "later-1"); n != 1 {
		t.Fatalf("message later-1 posted %d times; want once", n)
	}
}

// TestServer_afterSeconds_cancelBeforeDue: a delayed run cancelled before
// it is due is never posted, by this serve or the next.
func TestServer_afterSeconds_cancelBeforeDue(t *testing.T) {
	e := newEnv(t, nil)
	th := e.newThread()
	base := time.Now()
	var skew atomic.Int64
	clock := func() time.Time { return base.Add(time.Duration(skew.Load())) }
	a := startDelayedServe(t, e, clock)
	a.run("POST", "/threads/"+th+"/runs", `{"assistant_id":"echo","after_seconds":60,"input":{"messages":[{"role":"user","content":"never","id":"never-1"}]}}`)
	if code, b := a.do("POST", "/threads/"+th+"/runs/never-1/cancel", ""); code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s; want 202", code, b)
	}
	if got := a.run("GET", "/threads/"+th+"/runs/never-1", ""); got.Status != "interrupted" {
		t.Fatalf("cancelled delayed run: %+v; want interrupted", got)
	}
	if code, b := a.do("GET", "/threads/"+th+"/runs/never-1/join", ""); code != http.StatusConflict {
		t.Fatalf("join of a cancelled delayed run: %d %s; want 409", code, b)
	}
	a.stop()
	skew.Store(int64(61 * time.Second))
	b := startDelayedServe(t, e, clock)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, done, err := b.c.PostDue(ctx, delayedTestBucket, clock()); err != nil || len(done) != 0 {
		t.Fatalf("drain after the cancel: done %v, err %v; want nothing", done, err)
	}
	if n := postsOf(t, e, th, "never-1"); n != 0 {
		t.Fatalf("a cancelled delayed run was posted %d times", n)
	}
}
