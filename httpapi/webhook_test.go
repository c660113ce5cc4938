package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/artifactr/artifactr/httpapi"
	"github.com/artifactr/artifactr/internal/testkit"
)

// receiver counts the webhook POSTs it gets; the first fail503 of them are
// answered 503.
type receiver struct {
	mu      sync.Mutex
	bodies  []map[string]any
	fail503 int
	srv     *httptest.Server
}

func newReceiver(t *testing.T, fail503 int) *receiver {
	rc := &receiver{fail503: fail503}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if rc.fail503 > 0 {
			rc.fail503--
			w.WriteHeader(503)
			return
		}
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		rc.bodies = append(rc.bodies, m)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) got() []map[string]any {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]map[string]any(nil), rc.bodies...)
}

// dispatcher runs the webhooks until its stop is called.
func (e *env) dispatcher(t *testing.T) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	wh := &httpapi.Webhooks{Store: e.store, Client: e.client, Backoff: 20 * time.Millisecond}
	go func() { defer close(done); _ = wh.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// A run's webhook is POSTed once when the run ends, retried past 503s.
func TestWebhooks_once(t *testing.T) {
	e := newEnv(t, nil)
	rc := newReceiver(t, 2)
	e.dispatcher(t)
	th := e.newThread()
	e.json("POST", "/threads/"+th+"/runs/wait", `{"assistant_id":"echo","webhook":"`+rc.srv.URL+`","input":{"messages":[{"role":"user","content":"hi","id":"w1"}]}}`, 200, nil)
	testkit.WaitFor(t, 10*time.Second, "the webhook", func() (bool, string) { return len(rc.got()) == 1, "" })
	b := rc.got()[0]
	if b["run_id"] != "w1" || b["thread_id"] != th || b["status"] != "success" {
		t.Fatalf("webhook body %v", b)
	}
	// A run without a webhook, and time for a duplicate to show.
	e.json("POST", "/threads/"+th+"/runs/wait", `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"again"}]}}`, 200, nil)
	e.json("POST", "/threads/"+th+"/runs/wait", `{"assistant_id":"echo","webhook":"`+rc.srv.URL+`","input":{"messages":[{"role":"user","content":"third","id":"w3"}]}}`, 200, nil)
	testkit.WaitFor(t, 10*time.Second, "the second webhook", func() (bool, string) { return len(rc.got()) == 2, "" })
	if got := rc.got(); got[1]["run_id"] != "w3" {
		t.Fatalf("webhooks %v", got)
	}
}

// A webhook whose run ends while no dispatcher runs is delivered by the
// next one: the log drives it.
func TestWebhooks_acrossRestart(t *testing.T) {
	e := newEnv(t, nil)
	rc := newReceiver(t, 0)
	stop := e.dispatcher(t)
	th := e.newThread()
	e.json("POST", "/threads/"+th+"/runs", `{"assistant_id":"slow","webhook":"`+rc.srv.URL+`","input":{"messages":[{"role":"user","content":"hi","id":"w2"}]}}`, 200, nil)
	testkit.WaitFor(t, 10*time.Second, "the post to be seen", func() (bool, string) {
		var r struct{ Status string }
		e.json("GET", "/threads/"+th+"/runs/w2", "", 200, &r)
		return r.Status == "running", r.Status
	})
	stop()
	e.json("GET", "/threads/"+th+"/runs/w2/join", "", 200, nil)
	if n := len(rc.got()); n != 0 {
		t.Fatalf("%d webhooks with no dispatcher", n)
	}
	e.dispatcher(t)
	testkit.WaitFor(t, 10*time.Second, "the webhook after the restart", func() (bool, string) { return len(rc.got()) == 1, "" })
	if b := rc.got()[0]; b["run_id"] != "w2" || b["status"] != "success" {
		t.Fatalf("webhook body %v", b)
	}
}
