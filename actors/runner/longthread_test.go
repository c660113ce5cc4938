package runner_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
)

// buildLong writes thread th of about n events to s: posts and echo turns
// (run_started, run_output, run_completed) under one claim, released. It
// returns the number of messages.
func buildLong(t testing.TB, s events.Store, th string, n int) int {
	t.Helper()
	ctx, now := context.Background(), time.Now()
	c, _, err := events.AcquireClaim(ctx, s, th, "builder", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	msgs := 0
	for written := 1; written+5 <= n; written += 4 {
		text := fmt.Sprintf("message %d of the long thread, with some words in it", msgs)
		ack, err := s.Post(ctx, th, &eventspb.MessagePosted{MessageId: fmt.Sprintf("b%d", msgs), Author: "builder", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		run := fmt.Sprintf("b-run-%d", msgs)
		st, err := s.Append(ctx, events.NewRunStarted(c, now, run, ack.Seq, "echo"), events.Fenced(c))
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Append(ctx, events.NewRunOutput(c, now, run, "echo: "+text), events.ExpectLast(st.Seq))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, events.NewRunCompleted(c, now, run, "echo: "+text), events.ExpectLast(out.Seq)); err != nil {
			t.Fatal(err)
		}
		msgs++
	}
	if err := events.ReleaseClaim(ctx, s, c, "built", now); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// heldBound bounds what a claimed thread's actor may hold for its past,
// whatever its length (issue 25's target): the compact view keeps no
// message id of a post the store's first-post index resolved.
const heldBound = 64 << 10

// A runner holding a claimed, idle thread of 100,000 events retains no
// more heap for it than for a fresh thread, within 64 KiB: not its
// messages, outputs, runs or message ids (before the compact view, about
// 17 MB; before the first-post index, 16 bytes a message). A size bound,
// measured after GCs, with both threads claimed and idle.
func TestRunner_longThreadHeldHeap(t *testing.T) {
	s := memstore.New(memstore.Config{})
	msgs := buildLong(t, s, "long", 100_000)
	// The runners that ran the thread resolved its posts as they came:
	// the index holds them (in the store, which here is in this process,
	// so it is filled before the baseline).
	envs, err := s.Load(context.Background(), "long", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := events.ResolveFirstPosts(context.Background(), s, envs); err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Config{Store: s, ID: "held", IdleTimeout: time.Hour, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Kill)
	fresh := &runWatch{s: s, th: "fresh"}
	post(t, s, "fresh", "hello")
	testkit.WaitFor(t, time.Minute, "the fresh thread's run", fresh.ended(1))
	base := heap()
	long := &runWatch{s: s, th: "long", from: uint64(s.Log().Len()) + 1}
	post(t, s, "long", "hello")
	testkit.WaitFor(t, 2*time.Minute, "the long thread's run", long.ended(1))
	held := int64(heap()) - int64(base)
	bound := int64(heldBound)
	t.Logf("held %d bytes for a thread of %d messages (%.1f a message), bound %d", held, msgs, float64(held)/float64(msgs), bound)
	if held > bound {
		t.Fatalf("the long thread holds %d bytes of heap beyond a fresh one, over %d (%d messages)", held, bound, msgs)
	}
	if long.runs[0].status != projections.RunCompleted {
		t.Fatalf("the long thread's run %+v", long.runs[0])
	}
}

// historyAgent replies "ok" and sends, for each turn, the texts of its
// history and conversation and of the page before its history.
type historyAgent struct{ turns chan [3][]string }

func (historyAgent) Name() string    { return "history" }
func (historyAgent) Steerable() bool { return false }
func (a historyAgent) Run(ctx context.Context, t agent.Turn) (string, error) {
	var got [3][]string
	hist := t.History()
	for _, m := range hist {
		got[0] = append(got[0], m.Text)
	}
	for _, m := range t.(agent.Conversational).Conversation() {
		got[1] = append(got[1], m.Text)
	}
	if len(hist) > 0 {
		page, err := t.(agent.Pager).MessagesBefore(ctx, hist[0].Seq, 2)
		if err != nil {
			return "", err
		}
		for _, m := range page {
			got[2] = append(got[2], m.Text)
		}
	}
	a.turns <- got
	return "ok", nil
}

// A turn's history is the window read from the log, with the replies of
// earlier runs in its conversation, and the agent pages back before it:
// the thread's core holds none of it.
func TestRunner_historyReadFromTheLog(t *testing.T) {
	s := memstore.New(memstore.Config{})
	ag := historyAgent{turns: make(chan [3][]string, 8)}
	r := startRunner(t, runner.Config{Store: s, Agent: ag, HistoryWindow: 2})
	t.Cleanup(r.Kill)
	var last [3][]string
	w := &runWatch{s: s, th: "hist", from: 1}
	for i := range 5 {
		post(t, s, "hist", fmt.Sprintf("m%d", i))
		select {
		case last = <-ag.turns:
		case <-time.After(time.Minute):
			t.Fatalf("turn %d did not run", i)
		}
		// Its reply lands before the next post, so the conversation's
		// order is the same in every run.
		testkit.WaitFor(t, time.Minute, "the turn's end", w.ended(i+1))
	}
	want := [3][]string{{"m2", "m3"}, {"m3", "ok"}, {"m0", "m1"}}
	if fmt.Sprint(last) != fmt.Sprint(want) {
		t.Fatalf("the fifth turn got history, conversation, page %q; want %q", last, want)
	}
}

// A claim with no snapshot replays a long log in bounded reads, folding
// each into the compact view: the ids of messages in every chunk stay
// known, so a hostile repost of the first message's id, published straight
// to the posted subject, is never run; the release saves a compact
// snapshot.
func TestRunner_chunkedReplayKeepsIDs(t *testing.T) {
	defer runner.SetReplayChunk(64)()
	srv := natsembedtest.RunForTest(t)
	ctx := context.Background()
	s, err := natsstore.New(ctx, natsstore.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	msgs := buildLong(t, s, "chunky", 2000)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ev := &eventspb.Event{Thread: "chunky", Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: "b0", Author: "hostile", Text: "run me twice"}}}
	data, h, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	h[events.HeaderMsgID] = []string{"hostile:b0"} // not the store's: no dedupe
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "threads.chunky.posted", Header: nats.Header(h), Data: data}); err != nil {
		t.Fatal(err)
	}
	w := &runWatch{s: s, th: "chunky", from: 1}
	testkit.WaitFor(t, time.Minute, "the built runs", w.ended(msgs))
	r := startRunner(t, runner.Config{Store: s, ID: "chunks", IdleTimeout: 200 * time.Millisecond})
	post(t, s, "chunky", "real")
	testkit.WaitFor(t, time.Minute, "the real post's run", w.ended(msgs+1))
	testkit.WaitFor(t, time.Minute, "the idle release", func() (bool, string) {
		st := r.Stats()
		return st.Held == 0 && st.SnapshotsSaved >= 1, fmt.Sprintf("%+v", st)
	})
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	auditClean(t, s, "chunky") // a run that took the repost is an I1 violation
	v := fold(t, s, "chunky")
	if n := len(v.Runs); n != msgs+1 || v.Runs[n-1].Status != projections.RunCompleted || len(v.Pending()) != 0 {
		t.Fatalf("%d runs (want the built ones and the real post's), last %+v, %d pending", n, v.Runs[n-1], len(v.Pending()))
	}
	snap, err := s.LoadSnapshot(ctx, "chunky")
	if err != nil {
		t.Fatal(err)
	}
	if sv, err := projections.DecodeSnapshot("chunky", snap); err != nil || !sv.Compacted() || sv.NumMessages() != msgs+1 {
		t.Fatalf("snapshot: %v; compact %v", err, sv != nil && sv.Compacted())
	}
}
