package natsstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
)

// ThreadHead answers what a post needs from the run subject's last event,
// the strategy key or the first post, and the id key.
func TestStore_ThreadHead(t *testing.T) {
	s := open(t, natsembedtest.RunForTest(t))
	th := eventstest.NewThread(t)
	head := func() events.Head {
		t.Helper()
		h, err := s.ThreadHead(ctxT(t), th, "m1")
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if h := head(); h != (events.Head{StrategyKnown: true}) {
		t.Fatalf("empty thread: %+v", h)
	}
	other := eventstest.NewThread(t)
	if _, err := s.Append(ctxT(t), events.NewThreadConfigured(other, time.Now(), events.StrategyReject), events.Check{}); err != nil {
		t.Fatal(err)
	}
	if h, err := s.ThreadHead(ctxT(t), other, "m1"); err != nil || h != (events.Head{Strategy: events.StrategyReject, StrategyKnown: true}) {
		t.Fatalf("configured, nothing posted: %+v %v", h, err)
	}
	a, err := s.Post(ctxT(t), th, &eventspb.MessagePosted{MessageId: "m1", Text: "x", Strategy: "interrupt"})
	if err != nil {
		t.Fatal(err)
	}
	// The post's sequence is recorded in its id key without waiting.
	testkit.WaitFor(t, 10*time.Second, "the id key to record the post", func() (bool, string) {
		h := head()
		return h.Posted == a.Seq, fmt.Sprintf("%+v", h)
	})
	if h := head(); h.Strategy != events.StrategyInterrupt || h.Posted != a.Seq || h.ActiveRun != "" {
		t.Fatalf("after the first post: %+v", h)
	}
	c := claim(t, s, th, "h")
	start, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", a.Seq, "echo"), events.Fenced(c))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctxT(t), events.NewThreadConfigured(th, time.Now(), events.StrategyReject), events.Check{}); err != nil {
		t.Fatal(err)
	}
	if h := head(); h.ActiveRun != "r1" || h.LastRunSeq != start.Seq || h.Strategy != events.StrategyReject {
		t.Fatalf("a run active, configured reject: %+v", h)
	}
	end, err := s.Append(ctxT(t), events.NewRunCompleted(c, time.Now(), "r1", "ok"), events.ExpectLast(start.Seq))
	if err != nil {
		t.Fatal(err)
	}
	if h := head(); h.ActiveRun != "" || h.LastRunSeq != end.Seq {
		t.Fatalf("the run ended: %+v", h)
	}
}
