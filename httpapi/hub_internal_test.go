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
	h := newHub(events.Subjects{}, []uint64{1})
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
	if !h.waitPos(context.Background(), []uint64{2}) {
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
	h.waitPos(context.Background(), []uint64{4 + subBuffer})
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

// With partitions the hub keeps a position per partition's stream, whose
// sequences are each their own: a wait for a sequence of one partition is
// not met by a larger one of another, and a fold of a thread is checked
// against its own partition's start.
func TestHub_partitions(t *testing.T) {
	subj := events.Subjects{Partitions: 4}
	h := newHub(subj, []uint64{1, 1, 1, 5})
	in := make(chan events.Envelope)
	go h.run(t.Context(), func(context.Context) func(func(events.Envelope, error) bool) {
		return func(yield func(events.Envelope, error) bool) {
			for env := range in {
				if !yield(env, nil) {
					return
				}
			}
		}
	})
	env := func(seq uint64, thread string) events.Envelope {
		e := metaEnv(seq, thread, false)
		e.Subject = subj.Thread(thread, events.KindPosted)
		return e
	}
	// t1 is in partition 2, t2 in 3 (docs/partitions.md).
	in <- env(9, "t1")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if h.waitPos(ctx, []uint64{0, 0, 0, 6}) {
		t.Fatal("partition 3 reached 6 by an event of partition 2")
	}
	in <- env(6, "t2")
	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	if !h.waitPos(wctx, []uint64{0, 0, 9, 6}) {
		t.Fatal("hub did not reach 9 in partition 2 and 6 in partition 3")
	}
	_, _, f := h.subscribe("t2")
	h.verify("t2", f, []events.Envelope{env(4, "t2")}) // 4 is before partition 3's start
	if _, got, _ := h.subscribe("t2"); got != nil {
		t.Fatal("t2 had an event before the hub's start in its partition: its fold must not be kept")
	}
	_, _, f = h.subscribe("t1")
	h.verify("t1", f, []events.Envelope{env(9, "t1")})
	if _, got, _ := h.subscribe("t1"); got == nil {
		t.Fatal("t1 began after the hub's start in its partition: its fold is complete")
	}
	close(in)
}
