package client_test

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/projections"
)

// countingStore counts the envelopes read from the log.
type countingStore struct {
	client.Store
	mu sync.Mutex // protects n
	n  int
}

func (s *countingStore) Load(ctx context.Context, thread string, from uint64) ([]events.Envelope, error) {
	envs, err := s.Store.Load(ctx, thread, from)
	s.mu.Lock()
	s.n += len(envs)
	s.mu.Unlock()
	return envs, err
}

func (s *countingStore) reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// builder writes a thread by hand to a memstore, as a runner would.
type builder struct {
	t      *testing.T
	store  *memstore.Store
	thread string
	claim  events.Claim
	now    time.Time
}

func newBuilder(t *testing.T, store *memstore.Store, thread string) *builder {
	t.Helper()
	b := &builder{t: t, store: store, thread: thread, now: time.Unix(1000, 0)}
	c, _, err := events.AcquireClaim(t.Context(), store, thread, "r/a", time.Hour, b.now)
	if err != nil {
		t.Fatal(err)
	}
	b.claim = c
	return b
}

func (b *builder) post(text string) uint64 {
	b.t.Helper()
	ack, err := b.store.Post(b.t.Context(), b.thread, &eventspb.MessagePosted{Text: text})
	if err != nil {
		b.t.Fatal(err)
	}
	return ack.Seq
}

func (b *builder) fenced(ev *eventspb.Event) {
	b.t.Helper()
	if _, err := b.store.Append(b.t.Context(), ev, events.Fenced(b.claim)); err != nil {
		b.t.Fatalf("append %s: %v", events.TypeOf(ev), err)
	}
}

func (b *builder) onRun(ev *eventspb.Event) {
	b.t.Helper()
	last, err := b.store.LastSeq(b.t.Context(), b.thread, events.KindRun)
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.store.Append(b.t.Context(), ev, events.ExpectLast(last)); err != nil {
		b.t.Fatalf("append %s: %v", events.TypeOf(ev), err)
	}
}

// turns writes n turns: a post, its run's start, an output and its end.
func (b *builder) turns(from, n int) {
	for i := from; i < from+n; i++ {
		m := b.post(fmt.Sprintf("message %d", i))
		run := fmt.Sprintf("run-%d", i)
		b.fenced(events.NewRunStarted(b.claim, b.now, run, m, "echo"))
		b.onRun(events.NewRunOutput(b.claim, b.now, run, fmt.Sprintf("output %d", i)))
		b.onRun(events.NewRunCompleted(b.claim, b.now, run, fmt.Sprintf("echo: message %d", i)))
	}
}

// snapshot saves the runner's compact snapshot of the thread as it is.
func (b *builder) snapshot() {
	b.t.Helper()
	envs, err := b.store.Load(b.t.Context(), b.thread, 1)
	if err != nil {
		b.t.Fatal(err)
	}
	// A fork's history, from its source, as a runner reads it.
	if err := projections.ResolveFirst(b.t.Context(), b.store, envs); err != nil {
		b.t.Fatal(err)
	}
	th := projections.Fold(b.thread, envs)
	th.Compact()
	data, err := th.EncodeSnapshot()
	if err != nil {
		b.t.Fatal(err)
	}
	if err := b.store.SaveSnapshot(b.t.Context(), b.thread, data); err != nil {
		b.t.Fatal(err)
	}
}

// longThread writes turns turns, the runner's snapshot, then 10 more
// turns, and an active run with an output and an open request, and a
// pending message: about 4*turns events.
func longThread(t *testing.T, store *memstore.Store, thread string, turns int) {
	t.Helper()
	b := newBuilder(t, store, thread)
	b.turns(0, turns)
	b.snapshot()
	b.turns(turns, 10)
	m := b.post("the last prompt")
	b.fenced(events.NewRunStarted(b.claim, b.now, "run-last", m, "echo"))
	b.onRun(events.NewRunOutput(b.claim, b.now, "run-last", "thinking"))
	b.onRun(events.NewRequestOpened(b.claim, b.now, "run-last", "q1", "which one?"))
	b.post("pending one")
}

// wantWindow checks that w is whole's newest n messages and the runs
// started since, with whole's state.
func wantWindow(t *testing.T, w *client.Window, whole *projections.Thread, n int) {
	t.Helper()
	total := len(whole.Messages)
	if w.NumMessages != total || w.OmittedMessages != total-n || len(w.Messages) != n {
		t.Fatalf("window: %d of %d messages, %d omitted; want %d of %d, %d omitted",
			len(w.Messages), w.NumMessages, w.OmittedMessages, n, total, total-n)
	}
	from := whole.Messages[total-n].Seq
	if w.From != from {
		t.Errorf("window from %d, want %d", w.From, from)
	}
	if !reflect.DeepEqual(w.Messages, whole.Messages[total-n:]) {
		t.Errorf("window's messages differ from the whole fold's newest %d", n)
	}
	var runs []*projections.Run
	for _, r := range whole.Runs {
		if r.StartSeq >= from {
			runs = append(runs, r)
		}
	}
	if len(w.Runs) != len(runs) || len(runs) > 0 && !reflect.DeepEqual(w.Runs, runs) {
		t.Errorf("window's runs differ: %d, want %d", len(w.Runs), len(runs))
	}
	if w.Claim != whole.Claim || w.Taken != whole.Taken || w.LastSeq != whole.LastSeq || !w.LastActivity.Equal(whole.LastActivity) {
		t.Errorf("state: claim %+v taken %d last %d; want claim %+v taken %d last %d",
			w.Claim, w.Taken, w.LastSeq, whole.Claim, whole.Taken, whole.LastSeq)
	}
	if (w.ActiveRun == nil) != (whole.ActiveRun == nil) || w.ActiveRun != nil && !reflect.DeepEqual(*w.ActiveRun, *whole.ActiveRun) {
		t.Errorf("active run %+v, want %+v", w.ActiveRun, whole.ActiveRun)
	}
	var pending []uint64
	for _, m := range whole.Pending() {
		pending = append(pending, m.Seq)
	}
	if !reflect.DeepEqual(w.PendingSeqs, pending) {
		t.Errorf("pending %v, want %v", w.PendingSeqs, pending)
	}
	var shown []projections.Message // the pending messages shown
	for _, m := range whole.Pending() {
		if m.Seq >= from {
			shown = append(shown, m)
		}
	}
	if !reflect.DeepEqual(w.OpenRequests(), whole.OpenRequests()) || !reflect.DeepEqual(w.Pending(), shown) {
		t.Errorf("open requests %+v pending %+v; want %+v, %+v", w.OpenRequests(), w.Pending(), whole.OpenRequests(), shown)
	}
}

// TestClient_ThreadLast_window: on a thread longer than n, ThreadLast
// returns exactly the whole fold's newest n messages, the runs started
// since, and the whole fold's claim, active run, open requests and pending
// messages. For a thread of at most n messages it is the whole fold.
func TestClient_ThreadLast_window(t *testing.T) {
	store := memstore.New(memstore.Config{})
	c := client.New(store)
	longThread(t, store, "long", 300)
	whole, err := c.Thread(t.Context(), "long")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 50, 200} {
		w, err := c.ThreadLast(t.Context(), "long", n)
		if err != nil {
			t.Fatal(err)
		}
		wantWindow(t, w, whole, n)
	}
	// --at: after the snapshot, the same window of the thread as it was
	// then; before it, the whole fold up to there, cut.
	for _, at := range []uint64{whole.LastSeq - 3, 700} {
		then, err := c.Thread(t.Context(), "long", client.AtSeq(at))
		if err != nil {
			t.Fatal(err)
		}
		w, err := c.ThreadLast(t.Context(), "long", 50, client.AtSeq(at))
		if err != nil {
			t.Fatal(err)
		}
		wantWindow(t, w, then, 50)
	}
	w, err := c.ThreadLast(t.Context(), "long", len(whole.Messages))
	if err != nil {
		t.Fatal(err)
	}
	if w.OmittedMessages != 0 || w.From != 0 || !reflect.DeepEqual(w.Thread, whole) {
		t.Errorf("a window of every message is not the whole fold: %d omitted from %d", w.OmittedMessages, w.From)
	}
}

// TestClient_ThreadLast_longRun: a run that started before the window and
// took its messages as steering is older than the window's first message:
// the window, folded from there, disagrees with the snapshot's state, and
// is read from further back until it agrees. The result is still the
// whole fold's newest messages.
func TestClient_ThreadLast_longRun(t *testing.T) {
	store := memstore.New(memstore.Config{})
	c := client.New(store)
	b := newBuilder(t, store, "steered")
	b.turns(0, 500)
	m := b.post("a long task")
	b.fenced(events.NewRunStarted(b.claim, b.now, "run-long", m, "echo"))
	for i := range 120 {
		s := b.post(fmt.Sprintf("steer %d", i))
		b.fenced(events.NewSteeringGiven(b.claim, b.now, "run-long", s))
		if i == 100 {
			b.snapshot()
		}
	}
	whole, err := c.Thread(t.Context(), "steered")
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.ThreadLast(t.Context(), "steered", 50)
	if err != nil {
		t.Fatal(err)
	}
	wantWindow(t, w, whole, 50)
	if w.Read >= int(whole.LastSeq) {
		t.Errorf("read %d events of %d: as many as the whole thread", w.Read, whole.LastSeq)
	}
	if w.ActiveRun == nil || w.ActiveRun.ID != "run-long" || len(w.ActiveRun.Steering) != 120 {
		t.Errorf("active run %+v, want run-long with its 120 steering messages", w.ActiveRun)
	}
}

// TestClient_ThreadLast_bounded: ThreadLast reads as many events from a
// thread of 8,000 events as from one of 2,000, fewer than a fixed bound,
// while Thread reads them all. Counts of envelopes read, not times.
func TestClient_ThreadLast_bounded(t *testing.T) {
	const n = 50
	reads := func(turns int) (last, all int) {
		store := memstore.New(memstore.Config{})
		longThread(t, store, "long", turns)
		cs := &countingStore{Store: store}
		c := client.New(cs)
		w, err := c.ThreadLast(t.Context(), "long", n)
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Messages) != n {
			t.Fatalf("%d messages, want %d", len(w.Messages), n)
		}
		last = cs.reads()
		if w.Read != last {
			t.Errorf("Window.Read %d, but the store counted %d", w.Read, last)
		}
		if _, err := c.Thread(t.Context(), "long"); err != nil {
			t.Fatal(err)
		}
		return last, cs.reads() - last
	}
	last2k, all2k := reads(500)
	last8k, all8k := reads(2000)
	t.Logf("envelopes read: ThreadLast %d and %d, Thread %d and %d", last2k, last8k, all2k, all8k)
	// The window: n turns of 4 events, and the tail after the snapshot
	// (10 turns and 5 events) read twice.
	const bound = 4*n + 2*(4*10+5) + 10
	if last8k != last2k || last8k > bound {
		t.Errorf("ThreadLast read %d envelopes at 2,000 events and %d at 8,000; want equal and at most %d", last2k, last8k, bound)
	}
	if all8k < 8000 {
		t.Errorf("Thread read %d envelopes of a thread of 8,000 events", all8k)
	}
}

// TestClient_ThreadLast_reclaimed: the window holds a release of a claim
// made before it, and a new claim, as a runner's stop and another's claim
// leave them. The fold of the window starts with the claim the release
// names, so it agrees with the whole fold without reading further back.
func TestClient_ThreadLast_reclaimed(t *testing.T) {
	store := memstore.New(memstore.Config{})
	c := client.New(store)
	b := newBuilder(t, store, "reclaimed")
	b.turns(0, 100)
	if err := events.ReleaseClaim(t.Context(), store, b.claim, "stopping", b.now); err != nil {
		t.Fatal(err)
	}
	cl, _, err := events.AcquireClaim(t.Context(), store, "reclaimed", "r/b", time.Hour, b.now)
	if err != nil {
		t.Fatal(err)
	}
	b.claim = cl
	b.turns(100, 10)
	b.snapshot()
	b.turns(110, 10)
	whole, err := c.Thread(t.Context(), "reclaimed")
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.Anomalies) != 0 {
		t.Fatalf("anomalies %+v", whole.Anomalies)
	}
	w, err := c.ThreadLast(t.Context(), "reclaimed", 50)
	if err != nil {
		t.Fatal(err)
	}
	wantWindow(t, w, whole, 50)
	// The tail after the snapshot (10 turns) and one window of 50 turns,
	// with the release and the claim.
	if want := 4*10 + 4*50 + 2; w.Read > want {
		t.Errorf("read %d events, want at most %d: the window was read again", w.Read, want)
	}
}

// TestClient_ThreadLast_fork: a fork by reference with its own snapshot
// shows its newest messages without reading its source when they are its
// own, and with the history read from the source up to the fork's
// sequence when the window reaches into it. Either way it is the whole
// fold's newest messages.
func TestClient_ThreadLast_fork(t *testing.T) {
	store := memstore.New(memstore.Config{})
	c := client.New(store)
	src := newBuilder(t, store, "src")
	src.turns(0, 30)
	last, err := events.ThreadLastSeq(t.Context(), store, "src")
	if err != nil {
		t.Fatal(err)
	}
	src.turns(30, 5) // after the fork's point: not its history
	if _, err := c.Fork(t.Context(), "src", last, "fork"); err != nil {
		t.Fatal(err)
	}
	b := newBuilder(t, store, "fork")
	b.turns(100, 100)
	b.snapshot()
	b.turns(200, 5)
	whole, err := c.Thread(t.Context(), "fork")
	if err != nil {
		t.Fatal(err)
	}
	if whole.Fork == nil || len(whole.Messages) != 30+105 || len(whole.Anomalies) != 0 {
		t.Fatalf("the fork's whole fold: fork %+v, %d messages, anomalies %+v", whole.Fork, len(whole.Messages), whole.Anomalies)
	}
	for _, n := range []int{50, 120} {
		cs := &countingStore{Store: store}
		w, err := client.New(cs).ThreadLast(t.Context(), "fork", n)
		if err != nil {
			t.Fatal(err)
		}
		wantWindow(t, w, whole, n)
		if w.Fork == nil || *w.Fork != *whole.Fork {
			t.Errorf("--last %d: fork %+v, want %+v", n, w.Fork, whole.Fork)
		}
		if n == 50 && cs.reads() > 4*5+4*50 {
			t.Errorf("--last 50 read %d events: more than the tail and the window", cs.reads())
		}
	}
}

// TestClient_ThreadLast_backlog: more messages are pending than the window
// shows. The window shows the newest, pending; PendingSeqs counts every
// pending message, the older ones too.
func TestClient_ThreadLast_backlog(t *testing.T) {
	store := memstore.New(memstore.Config{})
	c := client.New(store)
	b := newBuilder(t, store, "backlog")
	b.turns(0, 100)
	for i := range 80 {
		b.post(fmt.Sprintf("queued %d", i))
	}
	b.snapshot()
	for i := range 5 {
		b.post(fmt.Sprintf("queued after %d", i))
	}
	whole, err := c.Thread(t.Context(), "backlog")
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.ThreadLast(t.Context(), "backlog", 50)
	if err != nil {
		t.Fatal(err)
	}
	wantWindow(t, w, whole, 50)
	if len(w.PendingSeqs) != 85 || len(w.Pending()) != 50 {
		t.Errorf("%d pending, %d of them shown; want 85 and 50", len(w.PendingSeqs), len(w.Pending()))
	}
	if w.Read > 5+50 {
		t.Errorf("read %d events, want the tail and the window, at most %d", w.Read, 5+50)
	}
}

// A runner's snapshot keeps no message id the first-post index answers
// for: a repost of an old id after it is still no message in the window,
// as in the whole fold, because the window looks its posts up.
func TestClient_ThreadLast_repostOfOldID(t *testing.T) {
	store := memstore.New(memstore.Config{})
	c := client.New(store)
	b := newBuilder(t, store, "reposted")
	ack, err := store.Post(t.Context(), "reposted", &eventspb.MessagePosted{MessageId: "old", Author: "a", Text: "the old one"})
	if err != nil {
		t.Fatal(err)
	}
	b.fenced(events.NewRunStarted(b.claim, b.now, "run-old", ack.Seq, "echo"))
	b.onRun(events.NewRunCompleted(b.claim, b.now, "run-old", "echo"))
	b.turns(0, 80)
	// The runner's snapshot: its posts resolved against the index first.
	envs, err := store.Load(t.Context(), "reposted", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := events.ResolveFirstPosts(t.Context(), store, envs); err != nil {
		t.Fatal(err)
	}
	th := projections.Fold("reposted", envs)
	th.Compact()
	data, err := th.EncodeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.SaveSnapshot(t.Context(), "reposted", data); err != nil {
		t.Fatal(err)
	}
	raw, err := proto.Marshal(&eventspb.Event{Thread: "reposted", Body: &eventspb.Event_MessagePosted{
		MessagePosted: &eventspb.MessagePosted{MessageId: "old", Author: "late", Text: "the old one, again"}}})
	if err != nil {
		t.Fatal(err)
	}
	store.Log().PublishRaw(store.Subjects().Thread("reposted", events.KindPosted), events.Header{events.HeaderType: {string(events.TypeMessagePosted)}}, raw)
	b.turns(80, 3)
	whole, err := c.Thread(t.Context(), "reposted")
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.ThreadLast(t.Context(), "reposted", 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.Pending()) != 0 || len(w.PendingSeqs) != 0 {
		t.Fatalf("pending: whole fold %d, window %d; want none (the repost is no message)", len(whole.Pending()), len(w.PendingSeqs))
	}
	wantWindow(t, w, whole, 50)
}
