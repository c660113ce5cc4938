package httpapi

import (
	"context"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

func metaEnv(seq uint64, thread string, created bool) events.Envelope {
	return events.Envelope{Seq: seq, Thread: thread, Kind: events.KindPosted, Type: events.TypeThreadMetadata, Stored: time.Unix(int64(seq), 0),
		Event: events.NewThreadMetadata(thread, time.Time{}, `{"k":1}`, created)}
}

// The hub hands a thread's events to its subscribers, keeps complete folds
// of threads it saw created, and drops a subscriber that falls behind.
func TestHub_subscribeFoldsAndLost(t *testing.T) {
	h := newHub(1)
	in := make(chan events.Envelope)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.run(context.Background(), func(context.Context) func(func(events.Envelope, error) bool) {
			return func(yield func(events.Envelope, error) bool) {
				for env := range in {
					if !yield(env, nil) {
						return
					}
				}
			}
		})
	}()
	in <- metaEnv(1, "a", true)  // created: a complete fold
	in <- metaEnv(2, "b", false) // not known to begin here
	if !h.waitPos(context.Background(), 2) {
		t.Fatal("hub did not reach 2")
	}
	sa, fa, _ := h.subscribe("a")
	if fa == nil || fa.LastSeq != 1 || len(fa.Metadata) != 1 {
		t.Fatalf("fold of a: %+v", fa)
	}
	sb, fb, hb := h.subscribe("b")
	if fb != nil || hb == nil {
		t.Fatalf("b's fold must wait for a read of its log: %v %v", fb, hb)
	}
	h.verify("b", hb, []events.Envelope{metaEnv(2, "b", false)})
	if _, fb, _ := h.subscribe("b"); fb == nil {
		t.Fatal("b verified: its fold is complete")
	}
	in <- events.Envelope{Seq: 3, Thread: "a", Kind: events.KindPosted, Type: events.TypeMessagePosted, Stored: time.Unix(3, 0),
		Event: &eventspb.Event{Thread: "a", Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: "m", Text: "x"}}}}
	if env := <-sa.ch; env.Seq != 3 {
		t.Fatalf("subscriber got %d", env.Seq)
	}
	for i := uint64(0); i < subBuffer+1; i++ {
		in <- metaEnv(4+i, "b", false)
	}
	h.waitPos(context.Background(), 4+subBuffer)
	h.mu.Lock()
	lost := sb.lost
	h.mu.Unlock()
	n := 0
	for range sb.ch {
		n++
	}
	if !lost || n != subBuffer {
		t.Fatalf("a subscriber behind by more than the buffer: lost %v after %d events", lost, n)
	}
	h.unsubscribe(sa)
	h.unsubscribe(sb) // already dropped: no double close
	close(in)
	<-done
	if h.subscribe("a"); !h.down {
		t.Fatal("the hub is not down after its follow ended")
	}
}
