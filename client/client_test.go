package client_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/audit"
	"github.com/artifactr/artifactr/spec"
)

// logServer starts an embedded server with a store on it, and no runner:
// the test writes the log by hand. It returns a client and the store.
func logServer(t *testing.T) (*client.Client, *natsstore.Store) {
	t.Helper()
	srv := natsembedtest.RunForTest(t)
	store, err := natsstore.New(t.Context(), natsstore.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	c, err := client.Dial(t.Context(), client.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, store
}

// hand writes a thread's log the way a holder does.
type hand struct {
	t     *testing.T
	store *natsstore.Store
	now   time.Time
}

func (h hand) post(thread, text string) uint64 {
	h.t.Helper()
	ack, err := h.store.Post(h.t.Context(), thread, &eventspb.MessagePosted{Text: text})
	if err != nil {
		h.t.Fatal(err)
	}
	return ack.Seq
}

func (h hand) claim(thread, holder string) events.Claim {
	h.t.Helper()
	c, _, err := events.AcquireClaim(h.t.Context(), h.store, thread, holder, time.Minute, h.now)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

func (h hand) fenced(ev *eventspb.Event, c events.Claim) uint64 {
	h.t.Helper()
	ack, err := h.store.Append(h.t.Context(), ev, events.Fenced(c))
	if err != nil {
		h.t.Fatalf("append %s: %v", events.TypeOf(ev), err)
	}
	return ack.Seq
}

func (h hand) onRun(ev *eventspb.Event) uint64 {
	h.t.Helper()
	last, err := h.store.LastSeq(h.t.Context(), ev.GetThread(), events.KindRun)
	if err != nil {
		h.t.Fatal(err)
	}
	ack, err := h.store.Append(h.t.Context(), ev, events.ExpectLast(last))
	if err != nil {
		h.t.Fatalf("append %s: %v", events.TypeOf(ev), err)
	}
	return ack.Seq
}

// auditAll audits and spec-validates every event of the stream.
func auditAll(t *testing.T, store *natsstore.Store) (audit.Report, spec.TraceReport) {
	t.Helper()
	threads, err := store.Threads(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var all []events.Envelope
	for _, th := range threads {
		envs, err := store.Load(t.Context(), th, 1)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, envs...)
	}
	slicesSortBySeq(all)
	a, v := audit.New(), spec.NewTraceValidator()
	for _, env := range all {
		if err := projections.ResolveFork(t.Context(), projections.LogOnly(store), &env); err != nil {
			t.Fatal(err)
		}
		a.Add(env)
		v.Add(env)
	}
	return a.Report(), v.Report()
}

func slicesSortBySeq(envs []events.Envelope) {
	for i := 1; i < len(envs); i++ {
		for j := i; j > 0 && envs[j].Seq < envs[j-1].Seq; j-- {
			envs[j], envs[j-1] = envs[j-1], envs[j]
		}
	}
}

// TestClient_Fork_refused: a fork onto a thread with events, of a sequence
// that is not the source's, of a source with no events, or with bad ids is
// refused, and writes nothing.
func TestClient_Fork_refused(t *testing.T) {
	c, store := logServer(t)
	ctx := t.Context()
	h := hand{t: t, store: store, now: time.Unix(1000, 0)}
	m1 := h.post("t1", "hello")
	other := h.post("o1", "elsewhere")
	m2 := h.post("t1", "again")
	h.post("busy", "I exist")
	h.claim("claimed", "r1/x") // a claim marker only: no post

	cases := []struct {
		name         string
		source       string
		seq          uint64
		into         string
		want, wantTo error
	}{
		{"new thread has posts", "t1", m1, "busy", client.ErrThreadExists, events.ErrConflict},
		{"new thread has a claim", "t1", m1, "claimed", client.ErrThreadExists, nil},
		{"seq of another thread", "t1", other, "n1", client.ErrNoSuchEvent, nil},
		{"seq zero", "t1", 0, "n1", client.ErrNoSuchEvent, nil},
		{"seq past the log", "t1", m2 + 100, "n1", client.ErrNoSuchEvent, nil},
		{"source without events", "nothing", 1, "n1", client.ErrNoEvents, nil},
		{"bad source id", "t.1", m1, "n1", events.ErrInvalidThreadID, nil},
		{"bad new id", "t1", m1, "n 1", events.ErrInvalidThreadID, nil},
		{"into itself", "t1", m1, "t1", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := store.Load(ctx, "n1", 1)
			_, err := c.Fork(ctx, tc.source, tc.seq, tc.into)
			if err == nil {
				t.Fatal("fork accepted")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
			if tc.wantTo != nil && !errors.Is(err, tc.wantTo) {
				t.Errorf("error %v does not wrap %v", err, tc.wantTo)
			}
			if !strings.HasPrefix(err.Error(), "client: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			after, _ := store.Load(ctx, "n1", 1)
			if len(after) != len(before) {
				t.Errorf("a refused fork wrote %d events to n1", len(after)-len(before))
			}
		})
	}
	if envs, _ := store.Load(ctx, "busy", 1); len(envs) != 1 {
		t.Errorf("busy has %d events, want its one post", len(envs))
	}
}

// TestClient_Fork_raceWithPost: a fork and a post to the same new thread,
// concurrently: the post always lands, and the fork lands only if it came
// first, as the thread's first event.
func TestClient_Fork_raceWithPost(t *testing.T) {
	c, store := logServer(t)
	ctx := t.Context()
	h := hand{t: t, store: store}
	m := h.post("src", "hello")
	for i := range 10 {
		into := "n" + string(rune('a'+i))
		var wg sync.WaitGroup
		var ferr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ferr = c.Fork(ctx, "src", m, into)
		}()
		h.post(into, "racing")
		wg.Wait()
		envs, err := store.Load(ctx, into, 1)
		if err != nil {
			t.Fatal(err)
		}
		forked := 0
		for j, env := range envs {
			if env.Type == events.TypeThreadForked {
				forked++
				if j != 0 {
					t.Errorf("%s: thread_forked is event %d, not the first", into, j)
				}
			}
		}
		switch {
		case ferr == nil && forked != 1, ferr != nil && forked != 0:
			t.Errorf("%s: fork error %v, %d thread_forked stored", into, ferr, forked)
		case ferr != nil && !errors.Is(ferr, client.ErrThreadExists):
			t.Errorf("%s: fork error %v, want ErrThreadExists", into, ferr)
		}
	}
}

// TestClient_Fork_pendingAndActiveAreHistory: forking at a sequence where a
// run is active and a message is pending copies both as history: in the
// new thread the message is consumed (as forked) and the run ended, so no
// run takes the message again. A run_started that does is an I1 violation
// for the audit and does not conform to the spec, while the fork itself
// and both threads' honest logs are clean.
func TestClient_Fork_pendingAndActiveAreHistory(t *testing.T) {
	c, store := logServer(t)
	ctx := t.Context()
	h := hand{t: t, store: store, now: time.Unix(1000, 0)}
	m1 := h.post("t1", "first")
	cl := h.claim("t1", "r1/a")
	h.fenced(events.NewRunStarted(cl, h.now, "run-a", m1, "echo"), cl)
	h.onRun(events.NewRunOutput(cl, h.now, "run-a", "partial"))
	m2 := h.post("t1", "second") // pending: run-a is active
	f, err := c.Fork(ctx, "t1", m2, "t2")
	if err != nil {
		t.Fatal(err)
	}
	if f.Messages != 2 || f.Runs != 1 || f.Duplicate {
		t.Errorf("fork %+v, want 2 messages and 1 run copied", f)
	}
	t2, err := c.Thread(ctx, "t2")
	if err != nil {
		t.Fatal(err)
	}
	if t2.Fork == nil || t2.Fork.Source != "t1" || t2.Fork.SourceSeq != m2 || t2.Fork.Seq != f.Seq {
		t.Errorf("fork %+v", t2.Fork)
	}
	if len(t2.Pending()) != 0 || t2.ActiveRun != nil || len(t2.Anomalies) != 0 {
		t.Errorf("t2 has pending %v, active run %v, anomalies %v", t2.Pending(), t2.ActiveRun, t2.Anomalies)
	}
	if len(t2.Messages) != 2 || t2.Messages[1].Seq != m2 || t2.Messages[1].Consumed == nil || t2.Messages[1].Consumed.Kind != projections.ConsumedForked {
		t.Errorf("t2 messages %+v", t2.Messages)
	}
	if r := t2.Runs[0]; r.Status != projections.RunAbandoned || !strings.Contains(r.Reason, "a fork carries no run over") ||
		len(r.Outputs) != 1 || r.Outputs[0] != "partial" {
		t.Errorf("t2 run %+v", r)
	}
	// t1 goes on as if nothing happened: run-a still active, m2 pending.
	t1, _ := c.Thread(ctx, "t1")
	if t1.ActiveRun == nil || len(t1.Pending()) != 1 {
		t.Errorf("t1 changed: active %v, pending %v", t1.ActiveRun, t1.Pending())
	}
	rep, tr := auditAll(t, store)
	if rep.ViolationCount != 0 || rep.AnomalyCount != 0 || !tr.OK() {
		t.Fatalf("audit of an honest fork: %+v\nspec: %+v", rep, tr.Nonconforming)
	}

	// A holder of t2 that starts a run on the copied, pending-in-t1 message.
	c2 := h.claim("t2", "r2/b")
	bad := h.fenced(events.NewRunStarted(c2, h.now, "run-b", m2, "echo"), c2)
	rep, tr = auditAll(t, store)
	if rep.ViolationCount != 1 || rep.Violations[0].Check != audit.CheckI1 || rep.Violations[0].Thread != "t2" {
		t.Errorf("audit: %+v, want one I1 violation in t2", rep.Violations)
	}
	if len(tr.Nonconforming) != 1 || tr.Nonconforming[0].Seq != bad {
		t.Errorf("spec: %+v, want t2's run_started at %d", tr.Nonconforming, bad)
	}
	t2, _ = c.Thread(ctx, "t2")
	if len(t2.Anomalies) != 1 || !strings.Contains(t2.Anomalies[0].Reason, "I1") {
		t.Errorf("fold anomalies %+v, want the I1 one", t2.Anomalies)
	}
}

// history is an agent that answers with the texts of its turn's history.
type history struct{}

func (history) Name() string    { return "history" }
func (history) Steerable() bool { return false }
func (history) Run(_ context.Context, t agent.Turn) (string, error) {
	var texts []string
	for _, m := range t.History() {
		texts = append(texts, m.Text)
	}
	return t.Prompt().Text + " after [" + strings.Join(texts, ", ") + "]", nil
}

// TestClient_Fork_agentHistory: a run in a forked thread is given the
// source's messages up to the fork's sequence as its history, and not the
// source's later ones.
func TestClient_Fork_agentHistory(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c, store := startHistoryRunner(t, ctx, 0)
	say := func(thread, text string) client.Result {
		t.Helper()
		p, err := c.Post(ctx, thread, text)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Wait(ctx, thread, p.Seq)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	say("t1", "a")
	b := say("t1", "b")
	say("t1", "c")
	t1, err := c.Thread(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	var at uint64 // the end of b's run
	for _, run := range t1.Runs {
		if run.ID == b.RunID {
			at = run.EndSeq
		}
	}
	if _, err := c.Fork(ctx, "t1", at, "t2"); err != nil {
		t.Fatal(err)
	}
	if got, want := say("t2", "d").Output, "d after [a, b]"; got != want {
		t.Errorf("t2's run: %q, want %q", got, want)
	}
	if got, want := say("t1", "e").Output, "e after [a, b, c]"; got != want {
		t.Errorf("t1's run: %q, want %q", got, want)
	}
	rep, tr := auditAll(t, store)
	if rep.ViolationCount != 0 || rep.AnomalyCount != 0 || !tr.OK() {
		t.Errorf("audit: %+v\nspec: %+v", rep, tr.Nonconforming)
	}
}

// TestClient_Wait_threadBusy: A claims the thread while a message waits; B
// takes the thread over before A starts a run on it, so A's run_started is
// refused (ADR-0069), and B's run takes the message. Wait reports
// ErrThreadBusy naming B's run, or, with FollowTakeover, B's result. A
// graceful hand-over (thread_released) is no refusal.
// Spec: StartFenced.
func TestClient_Wait_threadBusy(t *testing.T) {
	c, store := logServer(t)
	ctx := t.Context()
	h := hand{t: t, store: store, now: time.Unix(1000, 0)}

	m := h.post("t1", "hello")
	a := h.claim("t1", "r1/a")
	if err := store.ReleaseLease(ctx, a.Lease); err != nil { // as a lapse would
		t.Fatal(err)
	}
	b := h.claim("t1", "r2/b")
	if _, err := store.Append(ctx, events.NewRunStarted(a, h.now, "run-a", m, "echo"), events.Fenced(a)); !errors.Is(err, events.ErrThreadBusy) {
		t.Fatalf("A's run_started: %v, want it refused", err)
	}
	h.fenced(events.NewRunStarted(b, h.now, "run-b", m, "echo"), b)
	h.onRun(events.NewRunCompleted(b, h.now, "run-b", "echo: hello"))

	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err := c.Wait(wctx, "t1", m)
	var be *client.BusyError
	if !errors.Is(err, client.ErrThreadBusy) || !errors.As(err, &be) {
		t.Fatalf("Wait: %v, want ErrThreadBusy", err)
	}
	if be.RefusedClaim != a.Seq || be.RefusedHolder != "r1/a" || be.TakenOver != b.Seq || be.TakenBy != "run-b" || be.TakenAs != projections.ConsumedPrompt {
		t.Errorf("BusyError %+v", be)
	}
	if !strings.Contains(err.Error(), "run run-b took it instead") {
		t.Errorf("error %q does not say which run took the message", err)
	}
	res, err := c.Wait(wctx, "t1", m, client.FollowTakeover())
	if err != nil || res.RunID != "run-b" || res.Output != "echo: hello" || res.Status != projections.RunCompleted {
		t.Errorf("Wait with FollowTakeover: %+v, %v", res, err)
	}

	// t2: A releases the thread before B claims it: a hand-over.
	m = h.post("t2", "hello")
	a = h.claim("t2", "r1/a")
	if err := events.ReleaseClaim(ctx, store, a, "idle", h.now); err != nil {
		t.Fatal(err)
	}
	b = h.claim("t2", "r2/b")
	h.fenced(events.NewRunStarted(b, h.now, "run-b", m, "echo"), b)
	h.onRun(events.NewRunCompleted(b, h.now, "run-b", "echo: hello"))
	if res, err := c.Wait(wctx, "t2", m); err != nil || res.RunID != "run-b" {
		t.Errorf("Wait after a release: %+v, %v", res, err)
	}
}

// TestClient_Wait_errors: waiting for what is not a message, or past ctx,
// says so.
func TestClient_Wait_errors(t *testing.T) {
	c, store := logServer(t)
	ctx := t.Context()
	h := hand{t: t, store: store}
	m := h.post("t1", "hello")
	other := h.post("t2", "x")
	h.post("t1", "after")
	if _, err := c.Wait(ctx, "t1", other); err == nil || !strings.Contains(err.Error(), "is not a message of t1") {
		t.Errorf("Wait for another thread's seq: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(wctx, "t1", m); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "still pending") {
		t.Errorf("Wait on a pending message: %v", err)
	}
	if _, err := c.Wait(ctx, "t 1", m); !errors.Is(err, events.ErrInvalidThreadID) {
		t.Errorf("Wait on a bad id: %v", err)
	}
}

// TestDial_errors: bad configurations and unreachable or empty servers are
// clear errors.
func TestDial_errors(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		cfg  client.Config
		want string
	}{
		{client.Config{URL: "nats://127.0.0.1:1", NKeyFile: "a", CredsFile: "b"}, "give one"},
		{client.Config{URL: "nats://127.0.0.1:1", TLSCert: "a"}, "go together"},
		{client.Config{URL: "nats://127.0.0.1:1", NKeyFile: "/no/such/seed"}, "NKeyFile"},
		{client.Config{URL: "nats://127.0.0.1:1", CredsFile: "/no/such/creds"}, "CredsFile"},
		{client.Config{URL: "nats://127.0.0.1:1", Timeout: -1}, "negative"},
	} {
		if _, err := client.Dial(ctx, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "client: ") {
			t.Errorf("Dial(%+v): %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := client.Dial(ctx, client.Config{URL: "nats://127.0.0.1:1", Timeout: time.Second}); !errors.Is(err, events.ErrUnavailable) {
		t.Errorf("Dial of a closed port: %v", err)
	}
	srv := natsembedtest.RunForTest(t)
	if _, err := client.Dial(ctx, client.Config{URL: srv.ClientURL(), ReadOnly: true}); !errors.Is(err, natsstore.ErrNoStream) {
		t.Errorf("read-only Dial of an empty server: %v", err)
	}
}

// TestClient_Fork_forkOfForkHistoryWindow: forks by reference, of a fork
// too: each fork's first run is given its history read from the sources,
// the newest HistoryWindow messages of it.
func TestClient_Fork_forkOfForkHistoryWindow(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c, store := startHistoryRunner(t, ctx, 3)
	output := func(thread, text string) string {
		t.Helper()
		p, err := c.Post(ctx, thread, text)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Wait(ctx, thread, p.Seq)
		if err != nil {
			t.Fatal(err)
		}
		return res.Output
	}
	last := func(thread string) uint64 {
		t.Helper()
		seq, err := events.ThreadLastSeq(ctx, store, thread)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	for _, m := range []string{"a", "b", "c", "d"} {
		output("t1", m)
	}
	if _, err := c.Fork(ctx, "t1", last("t1"), "t2"); err != nil {
		t.Fatal(err)
	}
	if got, want := output("t2", "e"), "e after [b, c, d]"; got != want {
		t.Errorf("t2's first run: %q, want %q", got, want)
	}
	f, err := c.Fork(ctx, "t2", last("t2"), "t3")
	if err != nil {
		t.Fatal(err)
	}
	if f.Messages != 5 || f.Runs != 5 {
		t.Errorf("fork of the fork: %+v, want 5 messages and 5 runs of history", f)
	}
	if got, want := output("t3", "f"), "f after [c, d, e]"; got != want {
		t.Errorf("t3's first run: %q, want %q", got, want)
	}
	rep, tr := auditAll(t, store)
	if rep.ViolationCount != 0 || rep.AnomalyCount != 0 || !tr.OK() {
		t.Errorf("audit: %+v\nspec: %+v", rep, tr.Nonconforming)
	}
}

// startHistoryRunner starts a server, a runner of the history agent (with
// HistoryWindow window, 0 for the default) and a client of it, and returns
// the client and the runner's store; they stop when the test ends.
func startHistoryRunner(t *testing.T, ctx context.Context, window int) (*client.Client, *natsstore.Store) {
	t.Helper()
	srv := natsembedtest.RunForTest(t)
	store, err := natsstore.New(ctx, natsstore.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	r, err := runner.New(runner.Config{Store: store, Agent: history{}, ID: "hist", IdleTimeout: time.Hour, HistoryWindow: window,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Stop(context.WithoutCancel(ctx)); err != nil {
			t.Error(err)
		}
	})
	c, err := client.Dial(ctx, client.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, store
}
