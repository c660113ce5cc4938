package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/console"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections/summaries"
)

// nats-server stops a file store's flush loop, and its access-time
// ticker, after Shutdown returns: a stream made late (the runner's snapshot
// bucket, on its release at Stop) can still be stopping when the test
// binary ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"))
}

type env struct {
	url    string
	client *client.Client
	recent *console.Recent
}

// newEnv runs an embedded server, a runner with the echo agent, the
// summaries projector and the console on an httptest server.
func newEnv(t *testing.T) *env {
	t.Helper()
	srv := natsembedtest.RunForTest(t)
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	store, err := natsstore.New(ctx, natsstore.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	recent := console.NewRecent(16)
	r, err := runner.New(runner.Config{Store: store, Agent: agent.Echo{}, ID: "console-test", IdleTimeout: time.Hour,
		Logger: quiet, Observer: console.Observe(runner.NopObserver{}, recent)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := summaries.NewProjector(summaries.Config{Store: store, Owner: "test", Logger: quiet})
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
	ictx, stopIndex := context.WithCancel(ctx)
	ix := summaries.NewIndex(store, "", func(ctx context.Context, from []uint64) iter.Seq2[events.Envelope, error] {
		return c.WatchAll(ctx, from)
	})
	con := console.New(console.Config{Client: c, Store: store, Index: ix, Context: ictx, Recent: recent,
		Metrics: func() map[string]float64 { return map[string]float64{"artifactr_claims_total": 1} }})
	mux := http.NewServeMux()
	con.Register(mux, func(pattern string, h func(http.ResponseWriter, *http.Request) error) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if err := h(w, r); err != nil {
				code := http.StatusInternalServerError
				var hs interface{ HTTPStatus() int }
				if errors.As(err, &hs) {
					code = hs.HTTPStatus()
				}
				w.WriteHeader(code)
				_ = json.NewEncoder(w).Encode(map[string]string{"detail": err.Error()})
			}
		})
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		stopIndex()
		stopP()
		<-pdone
		_ = r.Stop(context.Background())
		c.Close()
		store.Close()
	})
	return &env{url: hs.URL, client: c, recent: recent}
}

func (e *env) get(t *testing.T, path string, v any) int {
	t.Helper()
	res, err := http.Get(e.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if v != nil {
		_ = json.NewDecoder(res.Body).Decode(v)
	}
	return res.StatusCode
}

func (e *env) post(t *testing.T, path, body string, v any) int {
	t.Helper()
	res, err := http.Post(e.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if v != nil {
		_ = json.NewDecoder(res.Body).Decode(v)
	}
	return res.StatusCode
}

// runEcho posts text to thread and waits for its run.
func (e *env) runEcho(t *testing.T, thread, text string) client.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := e.client.Post(ctx, thread, text)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.client.Wait(ctx, thread, p.Seq)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestConsole_pageHasNoInlineScriptAndACSP(t *testing.T) {
	e := newEnv(t)
	res, err := http.Get(e.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	_, _ = bufio.NewReader(res.Body).WriteTo(&b)
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Security-Policy") != console.CSP {
		t.Fatalf("GET /: %d, CSP %q", res.StatusCode, res.Header.Get("Content-Security-Policy"))
	}
	if !strings.Contains(console.CSP, "script-src 'self'") || strings.Contains(console.CSP, "unsafe-inline") {
		t.Fatalf("CSP allows inline scripts: %s", console.CSP)
	}
	html := b.String()
	if regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]+</script>`).MatchString(html) || regexp.MustCompile(`\son[a-z]+=`).MatchString(html) {
		t.Fatalf("index.html has inline script:\n%s", html)
	}
	for _, asset := range []string{"/ui/app.js", "/ui/style.css"} {
		if code := e.get(t, asset, nil); code != 200 {
			t.Errorf("GET %s: %d", asset, code)
		}
	}
	if !console.Public("/") || !console.Public("/ui/app.js") || console.Public("/artifactr/threads") {
		t.Error("Public: only the page and its assets go without a token")
	}
}

func TestConsole_threadsPagedAndFiltered(t *testing.T) {
	e := newEnv(t)
	for i := range 5 {
		e.runEcho(t, fmt.Sprintf("list-%d", i), "hello")
	}
	type page struct {
		Total   int
		Threads []struct {
			Thread, State, Holder string
		}
	}
	var p page
	testkit.WaitFor(t, 10*time.Second, "5 threads listed", func() (bool, string) {
		p = page{}
		e.get(t, "/artifactr/threads?limit=2", &p)
		return p.Total == 5, fmt.Sprint(p.Total)
	})
	if len(p.Threads) != 2 || p.Threads[0].State != "idle" || p.Threads[0].Holder == "" {
		t.Fatalf("first page: %+v", p)
	}
	var q page
	e.get(t, "/artifactr/threads?q=list-3", &q)
	if q.Total != 1 || q.Threads[0].Thread != "list-3" {
		t.Fatalf("search: %+v", q)
	}
	var last page
	e.get(t, "/artifactr/threads?sort=id&offset=4&limit=2", &last)
	if len(last.Threads) != 1 || last.Threads[0].Thread != "list-4" {
		t.Fatalf("last page by id: %+v", last)
	}
	for _, bad := range []string{"?limit=9999", "?offset=-1", "?status=nope", "?sort=size"} {
		var d struct{ Detail string }
		if code := e.get(t, "/artifactr/threads"+bad, &d); code != 422 || d.Detail == "" {
			t.Errorf("%s: %d %q, want 422 with a detail", bad, code, d.Detail)
		}
	}
}

// sseEvents reads up to n SSE events of one connection.
func sseEvents(t *testing.T, url, lastID string, n int) (ids []string, data []map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(res.Body)
	id := ""
	for sc.Scan() && len(ids) < n {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = line[4:]
		case strings.HasPrefix(line, "data: "):
			var m map[string]any
			if err := json.Unmarshal([]byte(line[6:]), &m); err != nil {
				t.Fatalf("data %q: %v", line, err)
			}
			ids, data = append(ids, id), append(data, m)
			id = ""
		}
	}
	return ids, data
}

func TestConsole_timelineResumesAfterLastEventID(t *testing.T) {
	e := newEnv(t)
	e.runEcho(t, "tl", "hello")
	// message_posted, thread_claimed, run_started, run_output, run_completed.
	ids, data := sseEvents(t, e.url+"/artifactr/threads/tl/events", "", 5)
	want := []string{"message_posted", "thread_claimed", "run_started", "run_output", "run_completed"}
	for i, d := range data {
		if d["type"] != want[i] || ids[i] != fmt.Sprint(d["seq"]) {
			t.Fatalf("event %d: id %s %v, want %s with id = seq", i, ids[i], d, want[i])
		}
	}
	if c, ok := data[2]["consumes"].(map[string]any); !ok || fmt.Sprint(c["seq"]) != ids[0] || c["kind"] != "prompt" {
		t.Fatalf("run_started does not say it took the post: %v", data[2])
	}
	// A reconnect after the third gets the fourth next: no gap, no repeat.
	ids2, _ := sseEvents(t, e.url+"/artifactr/threads/tl/events", ids[2], 2)
	if ids2[0] != ids[3] || ids2[1] != ids[4] {
		t.Fatalf("after Last-Event-ID %s: %v, want %v", ids[2], ids2, ids[3:5])
	}
	if code := e.get(t, "/artifactr/threads/bad.id/events", nil); code != 422 {
		t.Fatalf("bad id: %d", code)
	}
}

func TestConsole_foldAtSeq(t *testing.T) {
	e := newEnv(t)
	e.runEcho(t, "f1", "one")
	e.runEcho(t, "f1", "two")
	var latest, at struct {
		LastSeq  uint64
		Messages []struct{ Text string }
	}
	if code := e.get(t, "/artifactr/threads/f1/fold", &latest); code != 200 || len(latest.Messages) != 2 {
		t.Fatalf("latest: %d %+v", code, latest)
	}
	first := latest.LastSeq - 4 // the second post
	if code := e.get(t, fmt.Sprintf("/artifactr/threads/f1/fold?at=%d", first-1), &at); code != 200 || len(at.Messages) != 1 || at.Messages[0].Text != "one" {
		t.Fatalf("at %d: %d %+v", first-1, code, at)
	}
	for path, want := range map[string]int{
		fmt.Sprintf("/artifactr/threads/f1/fold?at=%d", latest.LastSeq+100): 404,
		"/artifactr/threads/f1/fold?at=x":                                   422,
		"/artifactr/threads/nosuch/fold":                                    404,
	} {
		if code := e.get(t, path, nil); code != want {
			t.Errorf("%s: %d, want %d", path, code, want)
		}
	}
}

func TestConsole_forkAndConfigure(t *testing.T) {
	e := newEnv(t)
	e.runEcho(t, "src", "hello")
	e.runEcho(t, "other", "hello")
	var f struct {
		Thread string
		Seq    uint64
	}
	if code := e.post(t, "/artifactr/threads/src/fork", `{"at":1,"thread":"dst"}`, &f); code != 200 || f.Thread != "dst" || f.Seq == 0 {
		t.Fatalf("fork: %d %+v", code, f)
	}
	for body, want := range map[string]int{
		`{"at":1,"thread":"dst"}`:    200, // the same fork again is idempotent
		`{"at":1,"thread":"other"}`:  409,
		`{"at":1,"thread":"src"}`:    422,
		`{"at":999,"thread":"d2"}`:   404,
		`{"at":0,"thread":"d3"}`:     422,
		`{"at":1,"thread":"bad id"}`: 422,
		`{"at":1,"nope":1}`:          422,
		`{`:                          422,
	} {
		if code := e.post(t, "/artifactr/threads/src/fork", body, nil); code != want {
			t.Errorf("fork %s: %d, want %d", body, code, want)
		}
	}
	if code := e.post(t, "/artifactr/threads/src/configure", `{"strategy":"sideways"}`, nil); code != 422 {
		t.Errorf("bad strategy: %d", code)
	}
	var c struct{ Seq uint64 }
	if code := e.post(t, "/artifactr/threads/src/configure", `{"strategy":"reject"}`, &c); code != 200 || c.Seq == 0 {
		t.Fatalf("configure: %d %+v", code, c)
	}
	var th struct{ Strategy string }
	e.get(t, "/artifactr/threads/src/fold", &th)
	if th.Strategy != "reject" {
		t.Fatalf("strategy after configure: %q", th.Strategy)
	}
}

func TestConsole_auditAndRunners(t *testing.T) {
	e := newEnv(t)
	e.runEcho(t, "a1", "hello")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/artifactr/audit", strings.NewReader(`{"spec":true}`))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	var report struct {
		OK    bool `json:"ok"`
		Audit struct {
			Events int `json:"events"`
		} `json:"audit"`
		Spec *struct{} `json:"spec"`
	}
	event := ""
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "event: ") {
			event = l[7:]
		} else if strings.HasPrefix(l, "data: ") && event == "report" {
			if err := json.Unmarshal([]byte(l[6:]), &report); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	res.Body.Close()
	if !report.OK || report.Audit.Events < 5 || report.Spec == nil {
		t.Fatalf("audit report: %+v", report)
	}
	var rs struct {
		Sessions []struct {
			Runner string
			Held   int
			Live   bool
		}
		Metrics map[string]float64
	}
	if code := e.get(t, "/artifactr/runners", &rs); code != 200 || len(rs.Sessions) != 1 || rs.Sessions[0].Runner != "console-test" ||
		rs.Sessions[0].Held != 1 || !rs.Sessions[0].Live || rs.Metrics["artifactr_claims_total"] != 1 {
		t.Fatalf("runners: %d %+v", code, rs)
	}
}

func TestRecent_keepsTheLastNOldestFirst(t *testing.T) {
	rc := console.NewRecent(3)
	woke, stop := rc.Subscribe()
	defer stop()
	for i := range 5 {
		rc.Add(console.Refusal{Thread: fmt.Sprintf("t%d", i%2), ClaimSeq: uint64(i)})
	}
	select {
	case <-woke:
	default:
		t.Fatal("Add woke no subscriber")
	}
	var got []uint64
	for _, r := range rc.All() {
		got = append(got, r.ClaimSeq)
	}
	if fmt.Sprint(got) != "[2 3 4]" {
		t.Fatalf("All: %v, want [2 3 4]", got)
	}
	if s := rc.Since("t1", 0); len(s.Refusals) != 1 || s.Refusals[0].ClaimSeq != 3 || s.Refusals[0].Seq != 4 || s.Next != 5 || s.Lost != 2 {
		t.Fatalf("Since(t1, 0): %+v", s)
	}
}

// A reader that reads at any pace sees each refusal of its thread, or is
// told that it lost it: sequence numbers, not ring positions, across the
// ring's wrap, while other threads' refusals come and go.
func TestRecent_Since_nothingMissedInSilence(t *testing.T) {
	rc := console.NewRecent(8)
	var after uint64
	seen := map[uint64]bool{}
	for round := range 60 {
		for i := range round % 13 {
			thread := "t"
			if i%3 == 2 {
				thread = "other"
			}
			rc.Add(console.Refusal{Thread: thread, Type: "run_output"})
			rc.Add(console.Refusal{Thread: thread, Type: console.TypeTakeover})
		}
		s := rc.Since("t", after)
		for _, r := range s.Refusals {
			if r.Thread != "t" || r.Seq <= after || seen[r.Seq] {
				t.Fatalf("round %d: Since(t, %d) returned %+v", round, after, r)
			}
			seen[r.Seq] = true
		}
		// Every refusal of t after the reader's position is returned or
		// at or below s.Lost.
		for q := after + 1; q <= s.Next; q++ {
			if isT(q) && !seen[q] && q > s.Lost {
				t.Fatalf("round %d: refusal %d of t neither returned nor reported lost (after %d, lost %d)", round, q, after, s.Lost)
			}
		}
		if s.Lost != 0 && !isT(s.Lost) {
			t.Fatalf("round %d: lost %d is not a refusal of t", round, s.Lost)
		}
		after = s.Next
	}
	if rc.Since("other", 0).Lost == 0 {
		t.Fatal("the ring never wrapped")
	}
	if s := rc.Since("never", 0); s.Lost != 0 || len(s.Refusals) != 0 {
		t.Fatalf("a thread without refusals: %+v", s)
	}
}

// isT reports whether Seq q of TestRecent_Since_nothingMissedInSilence's
// records is a refusal of t: records come in pairs (refusal, takeover),
// and each round's i%3 == 2 pairs are of another thread.
var isT = func() func(uint64) bool {
	var kinds []bool // by Seq-1: a refusal of t
	for round := range 60 {
		for i := range round % 13 {
			kinds = append(kinds, i%3 != 2, false)
		}
	}
	return func(q uint64) bool { return q >= 1 && int(q) <= len(kinds) && kinds[q-1] }
}()

// Past maxLostThreads threads with dropped refusals, Recent no longer
// knows which thread lost one, and says so to every reader behind it.
func TestRecent_Since_lostThreadsBounded(t *testing.T) {
	rc := console.NewRecent(1)
	for i := range 5000 {
		rc.Add(console.Refusal{Thread: fmt.Sprintf("t%d", i), Type: "run_output"})
	}
	if s := rc.Since("t0", 0); s.Lost == 0 {
		t.Fatalf("t0's dropped refusal is not reported: %+v", s)
	}
	if s := rc.Since("fresh", 4999); s.Lost != 0 {
		t.Fatalf("a reader past every drop is told of one: %+v", s)
	}
}

func TestObserve_recordsRefusalsAndTakeovers(t *testing.T) {
	rc := console.NewRecent(8)
	o := console.Observe(runner.NopObserver{}, rc)
	c := events.Claim{Thread: "t", Holder: "r/1", Seq: 7}
	start := &eventspb.Event{Body: &eventspb.Event_RunStarted{RunStarted: &eventspb.RunStarted{RunId: "r"}}}
	out := &eventspb.Event{Body: &eventspb.Event_RunOutput{RunOutput: &eventspb.RunOutput{RunId: "r"}}}
	o.Appending(c, start, nil)(events.Ack{Seq: 9}, nil)
	o.Appending(c, start, nil)(events.Ack{}, fmt.Errorf("x: %w", events.ErrThreadBusy))
	o.Appending(c, out, nil)(events.Ack{}, fmt.Errorf("x: %w", events.ErrConflict))
	o.Appending(c, out, nil)(events.Ack{}, events.ErrUnavailable)
	o.Claimed(c, false)
	o.Claimed(c, true)
	var kinds []string
	for _, r := range rc.All() {
		kinds = append(kinds, r.Type+":"+strings.Fields(r.Reason)[0])
	}
	if fmt.Sprint(kinds) != "[run_started:fence: run_output:compare-and-set: takeover:claimed]" {
		t.Fatalf("recorded %v", kinds)
	}
}

// A timeline connection open while more refusals are recorded than the
// ring holds (16 here) gets each refusal of its thread, or a refused_lost
// marker that covers it: never a silent gap, however the handler's reads
// interleave with the adds. A connection opened after the wrap is told
// too. Takeovers are not refusals: the timeline shows them from the log.
func TestConsole_timelineRefusalsAcrossTheRingsWrap(t *testing.T) {
	e := newEnv(t)
	ofWrap := map[uint64]bool{} // by Seq: a refusal of thread wrap
	var last uint64
	add := func(thread, typ string) {
		e.recent.Add(console.Refusal{Thread: thread, Type: typ, By: console.ByCAS, Reason: "compare-and-set"})
		last++ // only this test adds: the runner has no threads
		ofWrap[last] = thread == "wrap" && typ != console.TypeTakeover
	}
	add("wrap", "run_output")
	open := openRefusals(t, e.url+"/artifactr/threads/wrap/events")
	open.until(t, 1)
	for i := range 40 {
		add("wrap", "run_output")
		if i%5 == 0 {
			add("other", "run_output")
			add("wrap", console.TypeTakeover)
		}
	}
	add("wrap", "run_output")
	if n := e.recent.Since("wrap", 0).Next; n != last {
		t.Fatalf("Recent numbered %d records, the test added %d", n, last)
	}
	open.until(t, last)
	open.covers(t, ofWrap, last)
	t.Logf("the open connection got %d refusals, lost through %d", len(open.got), open.lost)

	late := openRefusals(t, e.url+"/artifactr/threads/wrap/events")
	late.until(t, last)
	late.covers(t, ofWrap, last)
	if late.lost == 0 {
		t.Fatalf("a connection opened after the wrap was not told of the dropped refusals (got %v)", late.got)
	}
}

// refusals reads a timeline connection's refused and refused_lost events.
type refusals struct {
	sc   *bufio.Scanner
	got  map[uint64]bool
	lost uint64
	name string
}

func openRefusals(t *testing.T, url string) *refusals {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return &refusals{sc: bufio.NewScanner(res.Body), got: map[uint64]bool{}}
}

// until reads until the refusal numbered seq came.
func (r *refusals) until(t *testing.T, seq uint64) {
	t.Helper()
	for !r.got[seq] && r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			r.name = line[7:]
		case strings.HasPrefix(line, "data: "):
			var d struct {
				Seq, Through uint64
				Type, By     string
			}
			if err := json.Unmarshal([]byte(line[6:]), &d); err != nil {
				t.Fatal(err)
			}
			switch r.name {
			case "refused":
				if d.Type == console.TypeTakeover || d.By != console.ByCAS || r.got[d.Seq] {
					t.Fatalf("refused event %s", line)
				}
				r.got[d.Seq] = true
			case "refused_lost":
				r.lost = max(r.lost, d.Through)
			}
		}
	}
	if !r.got[seq] {
		t.Fatalf("refusal %d never came: %v (%v)", seq, r.got, r.sc.Err())
	}
}

// covers checks that each refusal of the thread up to last came or is at
// or below a refused_lost marker.
func (r *refusals) covers(t *testing.T, ofThread map[uint64]bool, last uint64) {
	t.Helper()
	for q := uint64(1); q <= last; q++ {
		if ofThread[q] && !r.got[q] && q > r.lost {
			t.Fatalf("refusal %d was skipped in silence (got %v, lost through %d)", q, r.got, r.lost)
		}
	}
}
