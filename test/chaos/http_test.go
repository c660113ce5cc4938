package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/httpapi"
	"github.com/artifactr/artifactr/internal/sys"
)

// front is one serve's HTTP API: an httpapi.Server on its own NATS
// connection (as serve's is: a client of its own beside the runner's
// store), listening on loopback through httpapi.Listen.
type front struct {
	name string // its NATS connection's name, to find it for kicks
	c    *client.Client
	l    *httpapi.Listening
}

// startFronts starts n HTTP API servers over the harness's NATS servers,
// with the echo agent as their one assistant (the runners' agent).
func (h *harness) startFronts(n int) {
	h.t.Helper()
	for i := range n {
		name := fmt.Sprintf("httpapi-%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c, err := client.Dial(ctx, client.Config{URL: h.urls(), Timeout: 5 * time.Second, Logger: h.log,
			NATSOptions: []nats.Option{nats.Name(name), nats.ReconnectWait(50 * time.Millisecond), nats.ReconnectJitter(50*time.Millisecond, 0)}})
		cancel()
		if err != nil {
			h.t.Fatalf("front %s: %v", name, err)
		}
		api, err := httpapi.New(httpapi.Config{Client: c, Assistants: []httpapi.Assistant{{GraphID: "echo", Kind: "echo"}}, Default: "echo", Logger: h.log})
		if err != nil {
			c.Close()
			h.t.Fatalf("front %s: %v", name, err)
		}
		l, err := httpapi.Listen(api, "127.0.0.1:0", "", "")
		if err != nil {
			api.Close()
			c.Close()
			h.t.Fatalf("front %s: %v", name, err)
		}
		h.fronts = append(h.fronts, &front{name: name, c: c, l: l})
	}
	h.web = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}, Timeout: 15 * time.Second}
	// Every thread is created through the API first, as a LangGraph client
	// does (POST /threads); the runs then name existing threads.
	for _, th := range h.threads {
		code, body, err := h.call(h.fronts[0], "POST", "/threads", map[string]any{"thread_id": th, "if_exists": "do_nothing"})
		if err != nil || code != http.StatusOK {
			h.t.Fatalf("create thread %s: %d %s %v", th, code, body, err)
		}
	}
}

// closeFronts stops the HTTP servers and their connections.
func (h *harness) closeFronts() {
	for _, f := range h.fronts {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = f.l.Close(ctx)
		cancel()
		f.c.Close()
	}
	h.fronts = nil
	if h.web != nil {
		h.web.CloseIdleConnections()
	}
}

// frontConn finds f's NATS connection on the servers, for a kick.
func (h *harness) kickFront(f *front) bool {
	for _, s := range h.servers() {
		cz, err := s.NATS().Connz(&server.ConnzOptions{Limit: 1 << 12})
		if err != nil {
			continue
		}
		for _, ci := range cz.Conns {
			if ci.Name == f.name {
				return s.NATS().DisconnectClientByID(ci.Cid) == nil
			}
		}
	}
	return false
}

// call sends one JSON request to f and returns the status and body.
func (h *harness) call(f *front, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, f.l.URL+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.web.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// httpRun is what the posters read of a created run.
type httpRun struct {
	RunID      string `json:"run_id"`
	ThreadID   string `json:"thread_id"`
	Status     string `json:"status"`
	MessageSeq uint64 `json:"artifactr_message_seq"`
}

// httpOutcome is how a create ended.
type httpOutcome int

const (
	httpAcked   httpOutcome = iota // 200: the run, with its message's sequence
	httpRefused                    // 409 on the first attempt: busy under reject, nothing written
	httpGaveUp                     // no answer within the poster's minute
)

// httpCreate creates a run of one human message with id through front i,
// as `client.runs.create(thread, "echo", {input: {messages: [{role:
// "user", content: text, id}]}, multitaskStrategy})` does. An error, a
// timeout or a 5xx is retried with the same id through the other front, as
// a client behind a load balancer retries. It returns the run's message
// sequence when acked.
func (h *harness) httpCreate(i int, thread, id, text, strategy string) (uint64, httpOutcome) {
	body := map[string]any{
		"assistant_id":       "echo",
		"input":              map[string]any{"messages": []map[string]any{{"role": "user", "content": text, "id": id}}},
		"multitask_strategy": strategy,
	}
	deadline := time.Now().Add(time.Minute)
	for attempt := 0; ; attempt++ {
		f := h.fronts[(i+attempt)%len(h.fronts)]
		code, b, err := h.call(f, "POST", "/threads/"+thread+"/runs", body)
		switch {
		case err == nil && code == http.StatusOK:
			var r httpRun
			if err := json.Unmarshal(b, &r); err != nil || r.RunID != id || r.ThreadID != thread || r.MessageSeq == 0 {
				h.t.Errorf("http: create run %s on %s via %s: got %s (%v); want run_id %s with its message's sequence", id, thread, f.name, b, err, id)
				return 0, httpGaveUp
			}
			if err := h.posts.record(thread, id, r.MessageSeq); err != nil {
				h.t.Errorf("http dedupe: %v", err)
			}
			return r.MessageSeq, httpAcked
		case err == nil && code == http.StatusConflict && attempt == 0 && strategy == "reject":
			h.posts.refuse(thread, id)
			return 0, httpRefused
		case err == nil && code < 500:
			// A 409 after an attempt whose outcome is unknown may be the
			// thread's busyness with the message already in: the checks
			// then take the log's word for it.
			if code != http.StatusConflict {
				h.t.Errorf("http: create run %s on %s via %s: %d %s", id, thread, f.name, code, b)
			}
			h.stats.add("http:conflict_after_retry", 1)
			return 0, httpGaveUp
		}
		h.stats.add("http:retried", 1)
		if time.Now().After(deadline) {
			h.stats.add("http:gave_up", 1)
			h.t.Logf("http: create run %s on %s: gave up: %d %s %v", id, thread, code, b, err)
			return 0, httpGaveUp
		}
		time.Sleep(100 * time.Millisecond) // back off
	}
}

// httpPostLoop creates runs through the fronts until ctx ends: mostly
// enqueue, some reject (refused with 409 while a run is active, nothing
// written). Some acked creates are sent again at once through the other
// front, some later: each must come back as the same run, with the same
// message sequence, and no second message.
func (h *harness) httpPostLoop(ctx context.Context) {
	var retries []retry
	for sys.Sleep(ctx, h.rng.dur(h.cfg.postGap)) {
		for len(retries) > 0 && time.Now().After(retries[0].due) {
			r := retries[0]
			retries = retries[1:]
			h.httpRepost(h.rng.intN(len(h.fronts)), r)
		}
		th := h.threads[h.rng.intN(len(h.threads))]
		id := fmt.Sprintf("h%06d", h.posts.next.Add(1))
		text := h.text(id)
		strategy := "enqueue"
		if h.rng.chance(0.15) {
			strategy = "reject"
		}
		i := h.rng.intN(len(h.fronts))
		seq, out := h.httpCreate(i, th, id, text, strategy)
		switch out {
		case httpRefused:
			h.stats.add("http:refused_busy", 1)
			continue
		case httpGaveUp:
			continue
		}
		h.stats.add("http:acked", 1)
		r := retry{thread: th, id: id, text: text, seq: seq}
		if h.rng.chance(h.cfg.pDupPost) {
			h.faults.add("http_duplicate", 1)
			h.httpRepost(i+1, r)
		}
		if h.rng.chance(h.cfg.pRetryPost) {
			h.faults.add("http_retried_later", 1)
			r.due = time.Now().Add(h.rng.dur([2]time.Duration{100 * time.Millisecond, 3 * time.Second}))
			retries = append(retries, r)
		}
	}
}

// httpRepost creates r's run again with its message id: the API must
// answer with the same run and the original message sequence. The retry
// names reject now and then: a repost is answered from its id even while
// the thread is busy.
func (h *harness) httpRepost(i int, r retry) {
	strategy := "enqueue"
	if h.rng.chance(0.3) {
		strategy = "reject"
	}
	seq, out := h.httpCreate(i, r.thread, r.id, r.text, strategy)
	switch {
	case out == httpRefused:
		h.t.Errorf("http: a repost of acked run %s on %s was refused busy: it is in the log at %d", r.id, r.thread, r.seq)
	case out != httpAcked:
	case seq != r.seq:
		h.t.Errorf("http: a repost of run %s on %s got message seq %d; want the original %d", r.id, r.thread, seq, r.seq)
	default:
		h.stats.add("http:duplicate_ack", 1)
	}
}

// startHTTPPosters starts cfg.httpPosters loops beside the NATS posters.
func (h *harness) startHTTPPosters(ctx context.Context, wg *sync.WaitGroup) {
	for range h.cfg.httpPosters {
		wg.Go(func() { h.httpPostLoop(ctx) })
	}
}

// httpSummary is the fronts' line of the summary.
func (h *harness) httpSummary() string {
	if h.cfg.fronts == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  http: fronts=%d posters=%d acked=%d refused_busy=%d duplicate_ack=%d retried=%d gave_up=%d refused ids=%d",
		h.cfg.fronts, h.cfg.httpPosters, h.stats.get("http:acked"), h.stats.get("http:refused_busy"), h.stats.get("http:duplicate_ack"),
		h.stats.get("http:retried"), h.stats.get("http:gave_up"), h.posts.refusedCount())
	return b.String()
}
