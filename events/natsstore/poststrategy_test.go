package natsstore

import (
	"errors"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// A post naming no strategy gets its thread's, read while its id key is
// made: enqueue on a new thread; under reject, refused while a run is
// active with its id freed, a repost answered with the original, and a
// post landing with the run subject's check once the run ended.
func TestStore_PostThreadStrategy(t *testing.T) {
	s := open(t, natsembedtest.RunForTest(t))
	th := eventstest.NewThread(t)
	postIt := func(id, text string) (events.Ack, error) {
		t.Helper()
		ack, decided, err := s.PostThreadStrategy(ctxT(t), th, &eventspb.MessagePosted{MessageId: id, Author: "a", Text: text})
		if !decided {
			t.Fatalf("post %s: not decided (%+v, %v)", id, ack, err)
		}
		return ack, err
	}
	stored := func(seq uint64) *eventspb.MessagePosted {
		t.Helper()
		for _, e := range load(t, s, th) {
			if e.Seq == seq {
				return e.Event.GetMessagePosted()
			}
		}
		t.Fatalf("no event at %d", seq)
		return nil
	}
	first, err := postIt("m1", "one")
	if err != nil {
		t.Fatal(err)
	}
	if got := stored(first.Seq).GetStrategy(); got != "enqueue" {
		t.Fatalf("a new thread's post stored with strategy %q, want enqueue", got)
	}
	if _, err := s.Append(ctxT(t), events.NewThreadConfigured(th, time.Now(), events.StrategyReject), events.Check{}); err != nil {
		t.Fatal(err)
	}
	c := claim(t, s, th, "h")
	start, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", first.Seq, "echo"), events.Fenced(c))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := postIt("m2", "two"); !errors.Is(err, events.ErrThreadBusy) {
		t.Fatalf("a post while busy under reject: %v, want ErrThreadBusy", err)
	}
	if n := countPosts(t, s, th); n != 1 {
		t.Fatalf("%d posts after the refusal, want 1", n)
	}
	if ack, err := postIt("m1", "one"); err != nil || !ack.Duplicate || ack.Seq != first.Seq {
		t.Fatalf("a repost while busy: %+v %v, want the original at %d", ack, err, first.Seq)
	}
	end, err := s.Append(ctxT(t), events.NewRunCompleted(c, time.Now(), "r1", "ok"), events.ExpectLast(start.Seq))
	if err != nil {
		t.Fatal(err)
	}
	// The refused post freed its id: another text may take it.
	ack, err := postIt("m2", "another two")
	if err != nil {
		t.Fatalf("the refused post's id, once idle: %v", err)
	}
	m := stored(ack.Seq)
	if m.GetStrategy() != "reject" || m.GetText() != "another two" {
		t.Fatalf("stored %+v, want another two under reject", m)
	}
	for _, e := range load(t, s, th) {
		if e.Seq == ack.Seq {
			if e.ExpectSeq != end.Seq || e.ExpectSubject != s.subj.Thread(th, events.KindRun) {
				t.Fatalf("the reject post's check: %d on %q, want %d on the run subject", e.ExpectSeq, e.ExpectSubject, end.Seq)
			}
		}
	}
}
