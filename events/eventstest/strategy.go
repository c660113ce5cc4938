package eventstest

import (
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// RunStrategies runs the contract of the double-texting strategies and
// cancel (issue 15) against the store h opens: a post's check on the run
// subject (reject), and the events clients append with no check.
func RunStrategies(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"PostExpectRun", testPostExpectRun},
		{"PostExpectRunRepost", testPostExpectRunRepost},
		{"ClientWritten", testClientWritten},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// A post carrying WithExpectRunSeq lands only while the run subject's last
// sequence is the one expected; otherwise it is refused with ErrConflict and
// nothing is written. The check is stored with the post.
func testPostExpectRun(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	reject := &eventspb.MessagePosted{Text: "r", Strategy: string(events.StrategyReject)}
	ack, err := s.Post(ctxT(t), th, reject, events.WithExpectRunSeq(0))
	if err != nil {
		t.Fatalf("post expecting an empty run subject: %v", err)
	}
	c, _ := claim(t, s, th, "A", time.Now())
	if _, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", ack.Seq, "a"), events.Fenced(c)); err != nil {
		t.Fatal(err)
	}
	before := len(load(t, s, th))
	_, err = s.Post(ctxT(t), th, &eventspb.MessagePosted{MessageId: "late", Text: "x"}, events.WithExpectRunSeq(0))
	wantErr(t, err, events.ErrConflict, "post expecting 0 after a run started")
	if n := len(load(t, s, th)); n != before {
		t.Fatalf("%d events after a refused post, want %d", n, before)
	}
	run := lastSeq(t, s, th, events.KindRun)
	ack, err = s.Post(ctxT(t), th, &eventspb.MessagePosted{Text: "ok"}, events.WithExpectRunSeq(run))
	if err != nil {
		t.Fatalf("post expecting the run subject's last sequence: %v", err)
	}
	envs := load(t, s, th)
	got := envs[len(envs)-1]
	if got.Seq != ack.Seq || got.ExpectSeq != run || got.ExpectSubject != h.Subjects.Thread(th, events.KindRun) {
		t.Errorf("stored post %d expects %d on %q, want %d on the run subject", got.Seq, got.ExpectSeq, got.ExpectSubject, run)
	}
	if st := envs[0].Event.GetMessagePosted().GetStrategy(); st != string(events.StrategyReject) {
		t.Errorf("stored strategy %q", st)
	}
}

// A repost of a checked post whose first attempt landed is a duplicate, even
// when its check no longer holds (a single server checks before it
// deduplicates; the store reads the subject back).
func testPostExpectRunRepost(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	m := &eventspb.MessagePosted{MessageId: "m1", Text: "r"}
	first, err := s.Post(ctxT(t), th, m, events.WithExpectRunSeq(0))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := claim(t, s, th, "A", time.Now())
	if _, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", first.Seq, "a"), events.Fenced(c)); err != nil {
		t.Fatal(err)
	}
	again, err := s.Post(ctxT(t), th, m, events.WithExpectRunSeq(0))
	if err != nil || !again.Duplicate || again.Seq != first.Seq {
		t.Fatalf("repost: %+v, %v; want a duplicate of %d", again, err, first.Seq)
	}
}

// thread_configured and cancel_requested are appended by clients with no
// check, to the posted subject, deduplicated by message id; anything else
// about them is refused before any I/O.
func testClientWritten(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	ack, err := s.Append(ctxT(t), events.NewCancelRequested(th, time.Now(), "", "c1"), events.Check{}, events.WithMsgID(th+":cancel:c1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Append(ctxT(t), events.NewCancelRequested(th, time.Now(), "", "c1"), events.Check{}, events.WithMsgID(th+":cancel:c1"))
	if err != nil || !again.Duplicate || again.Seq != ack.Seq {
		t.Fatalf("repeated cancel: %+v, %v; want a duplicate of %d", again, err, ack.Seq)
	}
	if _, err := s.Append(ctxT(t), events.NewThreadConfigured(th, time.Now(), events.StrategyRollback), events.Check{}); err != nil {
		t.Fatal(err)
	}
	envs := load(t, s, th)
	if len(envs) != 2 || envs[0].Kind != events.KindPosted || envs[0].Type != events.TypeCancelRequested ||
		envs[1].Event.GetThreadConfigured().GetStrategy() != string(events.StrategyRollback) {
		t.Fatalf("stored %+v", envs)
	}
	bad := []struct {
		what string
		ev   *eventspb.Event
		chk  events.Check
	}{
		{"cancel with a check", events.NewCancelRequested(th, time.Now(), "", "c2"), events.ExpectLast(0)},
		{"cancel with a claim", func() *eventspb.Event {
			ev := events.NewCancelRequested(th, time.Now(), "", "c3")
			ev.ClaimSeq, ev.Holder = 1, "A"
			return ev
		}(), events.Check{}},
		{"cancel with a bad request id", events.NewCancelRequested(th, time.Now(), "", "a:b"), events.Check{}},
		{"configure an unknown strategy", events.NewThreadConfigured(th, time.Now(), "shout"), events.Check{}},
		{"configure no strategy", events.NewThreadConfigured(th, time.Now(), ""), events.Check{}},
		{"run_interrupted with no check", events.NewRunInterrupted(events.Claim{Thread: th, Seq: 1, Holder: "A"}, time.Now(), "r", 1, false), events.Check{}},
	}
	for _, b := range bad {
		_, err := s.Append(ctxT(t), b.ev, b.chk)
		wantErr(t, err, events.ErrInvalidEvent, b.what)
	}
	_, err = s.Post(ctxT(t), th, &eventspb.MessagePosted{Text: "x", Strategy: "shout"})
	wantErr(t, err, events.ErrInvalidEvent, "post with an unknown strategy")
	if n := len(load(t, s, th)); n != 2 {
		t.Fatalf("%d events after refused writes, want 2", n)
	}
}
