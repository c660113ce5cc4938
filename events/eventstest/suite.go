// Package eventstest is the contract suite every [events.Store] passes
// ([RunStore]), the suites of the read models' port ([RunReadModel]) and of
// the snapshot store ([RunSnapshot]), and test helpers for stores: a
// settable [Clock] and the [Unfenced] wrapper.
package eventstest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// Harness opens handles on one shared log for the contract suite.
type Harness struct {
	// Open returns a new handle on the shared log whose clock is now, as a
	// separate process would have. The suite does not close it.
	Open func(t *testing.T, now func() time.Time) events.Store
	// PublishRaw writes data to subject with no checks, as a forged or
	// buggy writer would.
	PublishRaw func(t *testing.T, subject string, h events.Header, data []byte)
	// Subjects are the log's subjects; the zero value is threads.*.
	Subjects events.Subjects
	// ExpireDuplicates, if set, moves the log's clock past its
	// deduplication window, so that every message id stored so far is
	// forgotten. The DuplicateWindow scenario needs it; a store whose
	// server clock cannot be moved (natsstore) leaves it nil.
	ExpireDuplicates func(t *testing.T)
}

// TTL is the lease TTL the suite claims with.
const TTL = 10 * time.Second

var threadSeq atomic.Uint64

// NewThread returns a thread id unique within the test binary.
func NewThread(t *testing.T) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	if len(name) > 90 {
		name = name[len(name)-90:]
	}
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, name)
	return fmt.Sprintf("%s-%d-%d", name, time.Now().UnixNano()%1e6, threadSeq.Add(1))
}

// RunStore runs the contract suite against the store h opens.
func RunStore(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"PostIdempotent", testPostIdempotent},
		{"AppendRetrySameMsgID", testAppendRetrySameMsgID},
		{"AppendRetryAfterTakeover", testAppendRetryAfterTakeover},
		{"AppendRetryCompareAndSet", testAppendRetryCompareAndSet},
		{"DuplicateWindow", testDuplicateWindow},
		{"PostNil", testPostNil},
		{"ClaimLoadsHistory", testClaimLoadsHistory},
		{"LeaseLifecycle", testLeaseLifecycle},
		{"ADRScenario", testADRScenario},
		{"StalledWrite", testStalledWrite},
		{"ClockSkew", testClockSkew},
		{"LapsedLeaseNobodyTook", testLapsedLeaseNobodyTook},
		{"RacingReplies", testRacingReplies},
		{"RunEndAfterAbandon", testRunEndAfterAbandon},
		{"ReleaseFencesHolder", testReleaseFencesHolder},
		{"CompareAndSet", testCompareAndSet},
		{"BadInput", testBadInput},
		{"Garbage", testGarbage},
		{"Tail", testTail},
		{"Threads", testThreads},
	}
	tests = append(tests, sessionTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func post(t *testing.T, s events.Poster, thread, id, text string) uint64 {
	t.Helper()
	ack, err := s.Post(ctxT(t), thread, &eventspb.MessagePosted{MessageId: id, Author: "test", Text: text})
	if err != nil {
		t.Fatalf("post %s/%s: %v", thread, id, err)
	}
	return ack.Seq
}

func claim(t *testing.T, s events.ClaimStore, thread, holder string, now time.Time) (events.Claim, []events.Envelope) {
	t.Helper()
	c, envs, err := events.AcquireClaim(ctxT(t), s, thread, holder, TTL, now)
	if err != nil {
		t.Fatalf("claim %s by %s: %v", thread, holder, err)
	}
	if c.Seq == 0 || c.Holder != holder {
		t.Fatalf("claim %s by %s: got %+v", thread, holder, c)
	}
	return c, envs
}

func load(t *testing.T, s events.Loader, thread string) []events.Envelope {
	t.Helper()
	envs, err := s.Load(ctxT(t), thread, 1)
	if err != nil {
		t.Fatalf("load %s: %v", thread, err)
	}
	return envs
}

// consumers returns, per message seq, the seqs of the events that consumed it.
func consumers(envs []events.Envelope) map[uint64][]uint64 {
	out := make(map[uint64][]uint64)
	for _, e := range envs {
		if e.Event == nil {
			continue
		}
		switch b := e.Event.Body.(type) {
		case *eventspb.Event_RunStarted:
			out[b.RunStarted.PromptSeq] = append(out[b.RunStarted.PromptSeq], e.Seq)
		case *eventspb.Event_AnswerGiven:
			out[b.AnswerGiven.MessageSeq] = append(out[b.AnswerGiven.MessageSeq], e.Seq)
		case *eventspb.Event_SteeringGiven:
			out[b.SteeringGiven.MessageSeq] = append(out[b.SteeringGiven.MessageSeq], e.Seq)
		}
	}
	return out
}

// activeRuns returns the ids of runs started and not ended in envs.
func activeRuns(envs []events.Envelope) []string {
	active := map[string]bool{}
	var order []string
	for _, e := range envs {
		if e.Event == nil {
			continue
		}
		switch b := e.Event.Body.(type) {
		case *eventspb.Event_RunStarted:
			active[b.RunStarted.RunId] = true
			order = append(order, b.RunStarted.RunId)
		case *eventspb.Event_RunCompleted:
			delete(active, b.RunCompleted.RunId)
		case *eventspb.Event_RunFailed:
			delete(active, b.RunFailed.RunId)
		case *eventspb.Event_RunAbandoned:
			delete(active, b.RunAbandoned.RunId)
		}
	}
	var out []string
	for _, id := range order {
		if active[id] {
			out = append(out, id)
		}
	}
	return out
}

// oldestUntaken plans as a holder does: the oldest posted message that no
// event consumed.
func oldestUntaken(envs []events.Envelope) (uint64, bool) {
	taken := consumers(envs)
	for _, e := range envs {
		if e.Type == events.TypeMessagePosted && e.Err == nil && len(taken[e.Seq]) == 0 {
			return e.Seq, true
		}
	}
	return 0, false
}

func countType(envs []events.Envelope, typ events.Type) int {
	n := 0
	for _, e := range envs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func lastSeq(t *testing.T, s events.LastSeqReader, thread string, k events.Kind) uint64 {
	t.Helper()
	n, err := s.LastSeq(ctxT(t), thread, k)
	if err != nil {
		t.Fatalf("last seq %s/%s: %v", thread, k, err)
	}
	return n
}

func testPostIdempotent(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	a1, err := s.Post(ctxT(t), th, &eventspb.MessagePosted{MessageId: "m1", Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := s.Post(ctxT(t), th, &eventspb.MessagePosted{MessageId: "m1", Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if a1.Duplicate || !a2.Duplicate || a1.Seq != a2.Seq {
		t.Fatalf("second post of m1: got %+v after %+v, want a duplicate of the same seq", a2, a1)
	}
	// The same message id in another thread is another message. (Not
	// told by its sequence: with partitions, threads in two partitions
	// number their events each in its own stream.)
	other := NewThread(t)
	a3, err := s.Post(ctxT(t), other, &eventspb.MessagePosted{MessageId: "m1", Author: "test", Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if a3.Duplicate || countType(load(t, s, other), events.TypeMessagePosted) != 1 {
		t.Fatalf("m1 in %s: got %+v, a duplicate of m1 in %s", other, a3, th)
	}
	envs := load(t, s, th)
	if n := countType(envs, events.TypeMessagePosted); n != 1 {
		t.Fatalf("%d messages stored for one message id, want 1", n)
	}
	if envs[0].MsgID != th+":m1" {
		t.Fatalf("msg id %q, want the thread id in it", envs[0].MsgID)
	}
	// An empty message id is filled in.
	if a, err := s.Post(ctxT(t), th, &eventspb.MessagePosted{Text: "no id"}); err != nil || a.Seq == 0 {
		t.Fatalf("post without id: %+v %v", a, err)
	}
}

func testAppendRetrySameMsgID(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	m := post(t, s, th, "m1", "x")
	c, _ := claim(t, s, th, "a", time.Now())
	ev := events.NewRunStarted(c, time.Now(), "run1", m, "echo")
	a1, err := s.Append(ctxT(t), ev, events.Fenced(c), events.WithMsgID(th+":rs1"))
	if err != nil {
		t.Fatal(err)
	}
	a2, err := s.Append(ctxT(t), ev, events.Fenced(c), events.WithMsgID(th+":rs1"))
	if err != nil {
		t.Fatalf("retry with the same msg id: %v", err)
	}
	if !a2.Duplicate || a2.Seq != a1.Seq {
		t.Fatalf("retry: got %+v, want duplicate of %d", a2, a1.Seq)
	}
	if n := countType(load(t, s, th), events.TypeRunStarted); n != 1 {
		t.Fatalf("%d run_started stored, want 1", n)
	}
}

// A fenced append that landed, whose ack was lost, retried after another
// claim took the thread: the retry must report that it landed, not busy.
func testAppendRetryAfterTakeover(t *testing.T, h Harness) {
	clockA, clockB := NewClock(0), NewClock(0)
	a, b := h.Open(t, clockA.Now), h.Open(t, clockB.Now)
	th := NewThread(t)
	m := post(t, a, th, "m1", "x")
	ca, _ := claim(t, a, th, "a", clockA.Now())
	ev := events.NewRunStarted(ca, clockA.Now(), "run1", m, "echo")
	first, err := a.Append(ctxT(t), ev, events.Fenced(ca), events.WithMsgID(th+":rs1"))
	if err != nil {
		t.Fatal(err)
	}
	clockB.Advance(2 * TTL)
	claim(t, b, th, "b", clockB.Now())
	again, err := a.Append(ctxT(t), ev, events.Fenced(ca), events.WithMsgID(th+":rs1"))
	if err != nil {
		t.Fatalf("retry of a landed append after a takeover: %v; want the original ack", err)
	}
	if again.Seq != first.Seq {
		t.Fatalf("retry seq %d, want %d", again.Seq, first.Seq)
	}
	// A new append under the old claim is refused.
	_, err = a.Append(ctxT(t), events.NewRunStarted(ca, clockA.Now(), "run2", m, "echo"), events.Fenced(ca))
	wantErr(t, err, events.ErrThreadBusy, "new append under the old claim")
}

// A compare-and-set append that landed, whose ack was lost, retried with
// the same message id: its own write moved the subject, so its check now
// fails. A replicated stream deduplicates first and acks the original; a
// single server checks first and refuses, and the store must read the
// subject back and report the original. Either way: one event, its seq.
func testAppendRetryCompareAndSet(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	m := post(t, s, th, "m1", "x")
	c, _ := claim(t, s, th, "a", time.Now())
	start, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "run1", m, "echo"), events.Fenced(c))
	if err != nil {
		t.Fatal(err)
	}
	ev := events.NewRunOutput(c, time.Now(), "run1", "out")
	first, err := s.Append(ctxT(t), ev, events.ExpectLast(start.Seq), events.WithMsgID(th+":out1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Append(ctxT(t), ev, events.ExpectLast(start.Seq), events.WithMsgID(th+":out1"))
	if err != nil {
		t.Fatalf("retry of a landed compare-and-set append: %v; want the original ack", err)
	}
	if again.Seq != first.Seq || !again.Duplicate {
		t.Fatalf("retry: %+v, want a duplicate of %d", again, first.Seq)
	}
	// Another id with the same stale check is a new write, and refused.
	_, err = s.Append(ctxT(t), ev, events.ExpectLast(start.Seq), events.WithMsgID(th+":out2"))
	wantErr(t, err, events.ErrConflict, "a new append expecting a stale seq")
	if n := countType(load(t, s, th), events.TypeRunOutput); n != 1 {
		t.Fatalf("%d run_output stored, want 1", n)
	}
}

// A post's message id is remembered forever; other message ids for the
// deduplication window only, counted from when the original was stored.
// After it, a repeated post is still a duplicate of the original (and the
// same id with another text a conflict, nothing written), but a repeated
// fenced append whose claim is still the newest is stored again: callers
// retry appends late only after reading the log back (see
// events.WithMsgID).
func testDuplicateWindow(t *testing.T, h Harness) {
	if h.ExpireDuplicates == nil {
		t.Log("the harness cannot move the server's clock; the window is covered on memstore and by natsstore's own test")
		return
	}
	s := h.Open(t, time.Now)
	th := NewThread(t)
	first := post(t, s, th, "m1", "x")
	c, _ := claim(t, s, th, "a", time.Now())
	ev := events.NewRunStarted(c, time.Now(), "run1", first, "echo")
	a1, err := s.Append(ctxT(t), ev, events.Fenced(c), events.WithMsgID(th+":rs1"))
	if err != nil {
		t.Fatal(err)
	}
	if a, err := s.Post(ctxT(t), th, &eventspb.MessagePosted{MessageId: "m1", Author: "test", Text: "x"}); err != nil || !a.Duplicate || a.Seq != first {
		t.Fatalf("repost within the window: %+v %v, want a duplicate of %d", a, err, first)
	}
	h.ExpireDuplicates(t)
	CheckRepostForever(t, s, th, "m1", "x", first)
	a2, err := s.Append(ctxT(t), ev, events.Fenced(c), events.WithMsgID(th+":rs1"))
	if err != nil || a2.Duplicate || a2.Seq == a1.Seq {
		t.Fatalf("fenced retry after the window: %+v %v, want it stored again", a2, err)
	}
	if n := countType(load(t, s, th), events.TypeRunStarted); n != 2 {
		t.Fatalf("%d run_started stored, want 2 (the window passed)", n)
	}
}

// CheckRepostForever checks that posting message id in thread again, with
// text (as its original at seq had, author "test"), returns a duplicate of
// seq, and that the id with another text is a conflict: either way nothing
// is written.
func CheckRepostForever(t *testing.T, s events.Store, thread, id, text string, seq uint64) {
	t.Helper()
	before := len(load(t, s, thread))
	a, err := s.Post(ctxT(t), thread, &eventspb.MessagePosted{MessageId: id, Author: "test", Text: text})
	if err != nil || !a.Duplicate || a.Seq != seq {
		t.Fatalf("repost of %s: %+v %v, want a duplicate of %d", id, a, err, seq)
	}
	_, err = s.Post(ctxT(t), thread, &eventspb.MessagePosted{MessageId: id, Author: "test", Text: text + " (edited)"})
	wantErr(t, err, events.ErrConflict, "repost of "+id+" with another text")
	if n := len(load(t, s, thread)); n != before {
		t.Fatalf("%d events after the reposts, want %d: a repost was stored", n, before)
	}
}

// Post of no message is refused, not a panic.
func testPostNil(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	_, err := s.Post(ctxT(t), NewThread(t), nil)
	wantErr(t, err, events.ErrInvalidEvent, "post of nil")
}

func testClaimLoadsHistory(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	m := post(t, s, th, "m1", "x")
	c, envs := claim(t, s, th, "a", time.Now())
	if len(envs) != 2 || envs[0].Seq != m || envs[1].Seq != c.Seq || envs[1].Type != events.TypeThreadClaimed {
		t.Fatalf("claim history: %+v, want the post then the marker", envs)
	}
	if envs[1].ExpectSeq != 0 || envs[1].Err != nil {
		t.Fatalf("first marker: expect seq %d err %v, want 0 and nil", envs[1].ExpectSeq, envs[1].Err)
	}
	if got := lastSeq(t, s, th, events.KindClaim); got != c.Seq {
		t.Fatalf("last claim seq %d, want %d", got, c.Seq)
	}
	if err := events.ReleaseClaim(ctxT(t), s, c, "done", time.Now()); err != nil {
		t.Fatal(err)
	}
	c2, envs := claim(t, s, th, "b", time.Now())
	last := envs[len(envs)-1]
	if last.Seq != c2.Seq || last.ExpectSeq != lastSeqBefore(envs, c2.Seq) {
		t.Fatalf("second marker %+v does not chain to the release", last)
	}
}

// lastSeqBefore returns the last claim-subject sequence in envs before seq.
func lastSeqBefore(envs []events.Envelope, seq uint64) uint64 {
	var last uint64
	for _, e := range envs {
		if e.Seq < seq && e.Kind == events.KindClaim {
			last = e.Seq
		}
	}
	return last
}

func testLeaseLifecycle(t *testing.T, h Harness) {
	clock := NewClock(0)
	s := h.Open(t, clock.Now)
	th := NewThread(t)
	l, err := s.AcquireLease(ctxT(t), th, "a", TTL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.AcquireLease(ctxT(t), th, "b", TTL)
	wantErr(t, err, events.ErrThreadBusy, "acquire a held lease")
	if !strings.Contains(err.Error(), "a") {
		t.Fatalf("busy error %q does not name the holder", err)
	}
	got, live, err := s.GetLease(ctxT(t), th)
	if err != nil || !live || got.Holder != "a" || got.Revision != l.Revision {
		t.Fatalf("get lease: %+v live=%v err=%v", got, live, err)
	}
	l2, err := s.RenewLease(ctxT(t), l)
	if err != nil || l2.Revision == l.Revision {
		t.Fatalf("renew: %+v %v", l2, err)
	}
	_, err = s.RenewLease(ctxT(t), l)
	wantErr(t, err, events.ErrLeaseLost, "renew from a stale revision")
	if err := s.ReleaseLease(ctxT(t), l2); err != nil {
		t.Fatal(err)
	}
	if _, live, _ := s.GetLease(ctxT(t), th); live {
		t.Fatal("released lease still live")
	}
	l3, err := s.AcquireLease(ctxT(t), th, "b", TTL)
	if err != nil {
		t.Fatalf("acquire a released lease: %v", err)
	}
	// Lapse by the clock.
	clock.Advance(2 * TTL)
	if _, live, _ := s.GetLease(ctxT(t), th); live {
		t.Fatal("lapsed lease still live")
	}
	l4, err := s.AcquireLease(ctxT(t), th, "c", TTL)
	if err != nil {
		t.Fatalf("acquire a lapsed lease: %v", err)
	}
	_, err = s.RenewLease(ctxT(t), l3)
	wantErr(t, err, events.ErrLeaseLost, "renew a lease taken over")
	err = s.ReleaseLease(ctxT(t), l3)
	wantErr(t, err, events.ErrLeaseLost, "release a lease taken over")
	if _, err := s.RenewLease(ctxT(t), l4); err != nil {
		t.Fatal(err)
	}
}

// adrSetup is ADR-0069's steps 1–3: A claims and plans, A's lease lapses, B
// claims, abandons nothing, reads taken unchanged and plans the same message.
func adrSetup(t *testing.T, h Harness) (th string, a, b events.Store, ca, cb events.Claim, ma, mb uint64, clockA, clockB *Clock) {
	t.Helper()
	clockA, clockB = NewClock(0), NewClock(0)
	a, b = h.Open(t, clockA.Now), h.Open(t, clockB.Now)
	th = NewThread(t)
	post(t, a, th, "m1", "first")
	post(t, a, th, "m2", "second")
	ca, envsA := claim(t, a, th, "A", clockA.Now())
	ma, ok := oldestUntaken(envsA)
	if !ok {
		t.Fatal("A found nothing to plan")
	}
	// Spec: Lapse. B's clock passes A's lease.
	clockB.Advance(2 * TTL)
	cb, envsB := claim(t, b, th, "B", clockB.Now())
	if runs := activeRuns(envsB); len(runs) != 0 {
		t.Fatalf("B sees active runs %v, want none", runs)
	}
	mb, _ = oldestUntaken(envsB)
	if ma != mb {
		t.Fatalf("A planned %d, B planned %d; the scenario needs the same message", ma, mb)
	}
	return
}

func checkOneLanded(t *testing.T, s events.Loader, th string, m uint64) {
	t.Helper()
	envs := load(t, s, th)
	if c := consumers(envs)[m]; len(c) != 1 {
		t.Fatalf("message %d consumed by %v, want exactly once (I1)", m, c)
	}
	if runs := activeRuns(envs); len(runs) != 1 {
		t.Fatalf("active runs %v, want one (I3)", runs)
	}
}

// Spec: RunStart, StartFenced.
func testADRScenario(t *testing.T, h Harness) {
	for _, order := range []string{"A first", "B first"} {
		t.Run(strings.ReplaceAll(order, " ", "_"), func(t *testing.T) {
			th, a, b, ca, cb, ma, mb, clockA, clockB := adrSetup(t, h)
			startA := func() error {
				_, err := a.Append(ctxT(t), events.NewRunStarted(ca, clockA.Now(), "runA", ma, "echo"), events.Fenced(ca))
				return err
			}
			startB := func() error {
				_, err := b.Append(ctxT(t), events.NewRunStarted(cb, clockB.Now(), "runB", mb, "echo"), events.Fenced(cb))
				return err
			}
			var errA, errB error
			if order == "A first" {
				errA, errB = startA(), startB()
			} else {
				errB, errA = startB(), startA()
			}
			wantErr(t, errA, events.ErrThreadBusy, "A's run_started under a lapsed, taken claim")
			if errB != nil {
				t.Fatalf("B's run_started: %v", errB)
			}
			checkOneLanded(t, a, th, ma)
		})
	}
}

// A's write is held in flight past the TTL, between plan and append.
func testStalledWrite(t *testing.T, h Harness) {
	th, a, b, ca, cb, ma, mb, clockA, clockB := adrSetup(t, h)
	hook := make(chan struct{})
	var wg sync.WaitGroup
	var errA error
	wg.Add(1)
	go func() {
		defer wg.Done()
		ev := events.NewRunStarted(ca, clockA.Now(), "runA", ma, "echo")
		<-hook // the stall: plan done, append not yet sent
		_, errA = a.Append(ctxT(t), ev, events.Fenced(ca))
	}()
	if _, err := b.Append(ctxT(t), events.NewRunStarted(cb, clockB.Now(), "runB", mb, "echo"), events.Fenced(cb)); err != nil {
		t.Fatalf("B's run_started: %v", err)
	}
	close(hook)
	wg.Wait()
	wantErr(t, errA, events.ErrThreadBusy, "A's stalled run_started")
	checkOneLanded(t, a, th, ma)
}

// A's clock is behind: A still believes its lease live, and renews, while B,
// whose clock runs ahead, sees it lapsed and takes the thread.
func testClockSkew(t *testing.T, h Harness) {
	clockA, clockB := NewClock(0), NewClock(3*TTL)
	a, b := h.Open(t, clockA.Now), h.Open(t, clockB.Now)
	th := NewThread(t)
	m := post(t, a, th, "m1", "x")
	ca, _ := claim(t, a, th, "A", clockA.Now())
	cb, _ := claim(t, b, th, "B", clockB.Now())
	if _, live, _ := a.GetLease(ctxT(t), th); !live {
		t.Fatal("A's view: B's lease should be live")
	}
	_, err := a.RenewLease(ctxT(t), ca.Lease)
	wantErr(t, err, events.ErrLeaseLost, "A renews after B took the lease")
	_, err = a.Append(ctxT(t), events.NewRunStarted(ca, clockA.Now(), "runA", m, "echo"), events.Fenced(ca))
	wantErr(t, err, events.ErrThreadBusy, "A's run_started under skew")
	if _, err := b.Append(ctxT(t), events.NewRunStarted(cb, clockB.Now(), "runB", m, "echo"), events.Fenced(cb)); err != nil {
		t.Fatal(err)
	}
	checkOneLanded(t, a, th, m)
}

// The fence is the holder, not the time.
func testLapsedLeaseNobodyTook(t *testing.T, h Harness) {
	clock := NewClock(0)
	s := h.Open(t, clock.Now)
	th := NewThread(t)
	m := post(t, s, th, "m1", "x")
	c, _ := claim(t, s, th, "A", clock.Now())
	clock.Advance(5 * TTL)
	if _, live, _ := s.GetLease(ctxT(t), th); live {
		t.Fatal("lease should have lapsed")
	}
	ack, err := s.Append(ctxT(t), events.NewRunStarted(c, clock.Now(), "run1", m, "echo"), events.Fenced(c))
	if err != nil {
		t.Fatalf("run_started under a lapsed lease nobody took: %v", err)
	}
	runSeq := ack.Seq
	ack, err = s.Append(ctxT(t), events.NewRunCompleted(c, clock.Now(), "run1", "ok"), events.ExpectLast(runSeq))
	if err != nil {
		t.Fatalf("run end under a lapsed lease nobody took: %v", err)
	}
}

// Spec: Reply, ReplyFenced. Two replies race to take one message to two
// requests; only the newest claim's lands.
func testRacingReplies(t *testing.T, h Harness) {
	for _, order := range []string{"stale_first", "newest_first"} {
		t.Run(order, func(t *testing.T) {
			clockA, clockB := NewClock(0), NewClock(0)
			a, b := h.Open(t, clockA.Now), h.Open(t, clockB.Now)
			th := NewThread(t)
			m1 := post(t, a, th, "m1", "prompt")
			ca, _ := claim(t, a, th, "A", clockA.Now())
			ack, err := a.Append(ctxT(t), events.NewRunStarted(ca, clockA.Now(), "runA", m1, "echo"), events.Fenced(ca))
			if err != nil {
				t.Fatal(err)
			}
			ack, err = a.Append(ctxT(t), events.NewRequestOpened(ca, clockA.Now(), "runA", "q1", "?"), events.ExpectLast(ack.Seq))
			if err != nil {
				t.Fatal(err)
			}
			m2 := post(t, a, th, "m2", "prompt 2")
			m3 := post(t, a, th, "m3", "the answer")
			// A plans to answer q1 with m3 ... and stalls. B takes over,
			// abandons A's run, starts one on m2 and opens q2.
			clockB.Advance(2 * TTL)
			cb, _ := claim(t, b, th, "B", clockB.Now())
			ack, err = b.Append(ctxT(t), events.NewRunAbandoned(cb, clockB.Now(), "runA", ca.Seq, "takeover"), events.Fenced(cb))
			if err != nil {
				t.Fatal(err)
			}
			ack, err = b.Append(ctxT(t), events.NewRunStarted(cb, clockB.Now(), "runB", m2, "echo"), events.Fenced(cb))
			if err != nil {
				t.Fatal(err)
			}
			if _, err = b.Append(ctxT(t), events.NewRequestOpened(cb, clockB.Now(), "runB", "q2", "?"), events.ExpectLast(ack.Seq)); err != nil {
				t.Fatal(err)
			}
			replyA := func() error {
				_, err := a.Append(ctxT(t), events.NewAnswerGiven(ca, clockA.Now(), "runA", "q1", m3), events.Fenced(ca))
				return err
			}
			replyB := func() error {
				_, err := b.Append(ctxT(t), events.NewAnswerGiven(cb, clockB.Now(), "runB", "q2", m3), events.Fenced(cb))
				return err
			}
			var errA, errB error
			if order == "stale_first" {
				errA, errB = replyA(), replyB()
			} else {
				errB, errA = replyB(), replyA()
			}
			wantErr(t, errA, events.ErrThreadBusy, "A's stale reply")
			if errB != nil {
				t.Fatalf("B's reply: %v", errB)
			}
			if c := consumers(load(t, a, th))[m3]; len(c) != 1 {
				t.Fatalf("m3 consumed by %v, want once", c)
			}
		})
	}
}

// A run's end is refused once the run has been abandoned.
func testRunEndAfterAbandon(t *testing.T, h Harness) {
	clockA, clockB := NewClock(0), NewClock(0)
	a, b := h.Open(t, clockA.Now), h.Open(t, clockB.Now)
	th := NewThread(t)
	m := post(t, a, th, "m1", "x")
	ca, _ := claim(t, a, th, "A", clockA.Now())
	ack, err := a.Append(ctxT(t), events.NewRunStarted(ca, clockA.Now(), "runA", m, "echo"), events.Fenced(ca))
	if err != nil {
		t.Fatal(err)
	}
	lastRunA := ack.Seq
	clockB.Advance(2 * TTL)
	cb, envs := claim(t, b, th, "B", clockB.Now())
	if runs := activeRuns(envs); len(runs) != 1 || runs[0] != "runA" {
		t.Fatalf("B sees active runs %v, want [runA]", runs)
	}
	if _, err := b.Append(ctxT(t), events.NewRunAbandoned(cb, clockB.Now(), "runA", ca.Seq, "takeover"), events.Fenced(cb)); err != nil {
		t.Fatal(err)
	}
	_, err = a.Append(ctxT(t), events.NewRunCompleted(ca, clockA.Now(), "runA", "done"), events.ExpectLast(lastRunA))
	wantErr(t, err, events.ErrConflict, "end of an abandoned run")
	if n := countType(load(t, a, th), events.TypeRunCompleted); n != 0 {
		t.Fatalf("%d run_completed stored after the abandon", n)
	}
}

// A released claim fences its holder as a newer claim does.
func testReleaseFencesHolder(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	m := post(t, s, th, "m1", "x")
	c, _ := claim(t, s, th, "A", time.Now())
	if err := events.ReleaseClaim(ctxT(t), s, c, "idle", time.Now()); err != nil {
		t.Fatal(err)
	}
	_, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "run1", m, "echo"), events.Fenced(c))
	wantErr(t, err, events.ErrThreadBusy, "run_started after release")
	if _, live, _ := s.GetLease(ctxT(t), th); live {
		t.Fatal("lease still live after release")
	}
	// Releasing again is harmless.
	if err := events.ReleaseClaim(ctxT(t), s, c, "idle", time.Now()); err != nil {
		t.Fatalf("second release: %v", err)
	}
}

func testCompareAndSet(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	m := post(t, s, th, "m1", "x")
	c, _ := claim(t, s, th, "A", time.Now())
	ack, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r", m, "echo"), events.Fenced(c))
	if err != nil {
		t.Fatal(err)
	}
	before := lastSeq(t, s, th, events.KindRun)
	_, err = s.Append(ctxT(t), events.NewRunOutput(c, time.Now(), "r", "x"), events.ExpectLast(ack.Seq-1))
	wantErr(t, err, events.ErrConflict, "run output expecting a stale run seq")
	if got := lastSeq(t, s, th, events.KindRun); got != before {
		t.Fatalf("refused append moved the run subject %d -> %d", before, got)
	}
	// The claim subject's compare-and-set: a marker expecting a stale seq.
	stale := &eventspb.Event{Thread: th, Holder: "X", Body: &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{Holder: "X"}}}
	_, err = s.Append(ctxT(t), stale, events.ExpectLast(0))
	wantErr(t, err, events.ErrConflict, "claim marker expecting an empty claim subject")
	envs := load(t, s, th)
	last := envs[len(envs)-1]
	if last.Type != events.TypeRunStarted || last.ExpectSeq != c.Seq || last.ExpectSubject != h.Subjects.Thread(th, events.KindClaim) {
		t.Fatalf("fenced event headers: type %s expect %d on %q, want %d on the claim subject", last.Type, last.ExpectSeq, last.ExpectSubject, c.Seq)
	}
}

func testBadInput(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	ctx := ctxT(t)
	bad := []string{"", "a.b", "a b", "a*", "a>", strings.Repeat("x", 129), "ü"}
	for _, id := range bad {
		_, err := s.Post(ctx, id, &eventspb.MessagePosted{Text: "x"})
		wantErr(t, err, events.ErrInvalidThreadID, fmt.Sprintf("post to %q", id))
		_, err = s.Load(ctx, id, 1)
		wantErr(t, err, events.ErrInvalidThreadID, fmt.Sprintf("load %q", id))
		_, err = s.AcquireLease(ctx, id, "h", TTL)
		wantErr(t, err, events.ErrInvalidThreadID, fmt.Sprintf("lease %q", id))
		_, _, err = events.AcquireClaim(ctx, s, id, "h", TTL, time.Now())
		wantErr(t, err, events.ErrInvalidThreadID, fmt.Sprintf("claim %q", id))
	}
	th := NewThread(t)
	if err := events.ValidateThreadID(strings.Repeat("x", 128)); err != nil {
		t.Fatalf("a 128-character id: %v", err)
	}
	_, err := s.Post(ctx, th, &eventspb.MessagePosted{Text: strings.Repeat("x", events.DefaultMaxEventBytes)})
	wantErr(t, err, events.ErrTooLarge, "oversized post")
	if envs := load(t, s, th); len(envs) != 0 {
		t.Fatalf("refused posts wrote %d events", len(envs))
	}
	m := post(t, s, th, "m1", "x")
	c, _ := claim(t, s, th, "A", time.Now())
	invalid := []struct {
		name string
		ev   *eventspb.Event
		chk  events.Check
	}{
		{"no body", &eventspb.Event{Thread: th}, events.ExpectLast(0)},
		{"post via append", &eventspb.Event{Thread: th, Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{}}}, events.ExpectLast(0)},
		{"unfenced run_started", events.NewRunStarted(c, time.Now(), "r", m, "echo"), events.ExpectLast(0)},
		{"fenced run_output", events.NewRunOutput(c, time.Now(), "r", "x"), events.Fenced(c)},
		{"fence on another claim", events.NewRunStarted(c, time.Now(), "r", m, "echo"), events.Check{Mode: events.CheckFence, Seq: c.Seq + 1}},
	}
	for _, tc := range invalid {
		_, err := s.Append(ctx, tc.ev, tc.chk)
		wantErr(t, err, events.ErrInvalidEvent, tc.name)
	}
	if got := lastSeq(t, s, th, events.KindRun); got != 0 {
		t.Fatalf("invalid appends wrote to the run subject (last seq %d)", got)
	}
}

func testGarbage(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	m := post(t, s, th, "m1", "x")
	h.PublishRaw(t, h.Subjects.Thread(th, events.KindRun), events.Header{events.HeaderType: {"run_started"}}, []byte("\xff\xfe not protobuf"))
	h.PublishRaw(t, h.Subjects.Thread(th, events.KindRun), nil, nil)
	c, envs := claim(t, s, th, "A", time.Now())
	if len(envs) != 4 || envs[1].Err == nil || envs[3].Seq != c.Seq {
		t.Fatalf("history with garbage: %d envelopes %+v", len(envs), envs)
	}
	// The garbage is on the run subject: a run-subject append must expect it.
	ack, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r", m, "echo"), events.Fenced(c))
	if err != nil {
		t.Fatal(err)
	}
	envs = load(t, s, th)
	if envs[len(envs)-1].Seq != ack.Seq || envs[len(envs)-1].Err != nil {
		t.Fatalf("event after garbage not loaded cleanly: %+v", envs[len(envs)-1])
	}
	for _, e := range envs[1:3] {
		if e.Err == nil {
			t.Fatalf("garbage at %d decoded without error", e.Seq)
		}
	}
}

func testTail(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	first := post(t, s, th, "m0", "before")
	tl, err := s.Tail(ctxT(t), h.Subjects.ThreadAll(th), first)
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Stop()
	other := NewThread(t)
	post(t, s, other, "x", "other thread")
	want := []uint64{first, post(t, s, th, "m1", "a"), post(t, s, th, "m2", "b")}
	for _, w := range want {
		env, err := tl.Next(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if env.Seq != w || env.Thread != th {
			t.Fatalf("tail got seq %d thread %s, want %d in %s", env.Seq, env.Thread, w, th)
		}
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	if _, err := tl.Next(ctx); err == nil {
		t.Fatal("Next on a cancelled context returned no error")
	}
	tl.Stop()
	tl.Stop()
}

func testThreads(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	post(t, s, th, "m1", "x")
	ths, err := s.Threads(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ths {
		if x == th {
			return
		}
	}
	t.Fatalf("threads %v lacks %s", ths, th)
}
