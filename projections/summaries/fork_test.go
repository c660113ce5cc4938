package summaries

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections"
)

// TestApply_forkedMatchesThread: the summary of a forked thread, folded
// event by event, is the summary of its projections.Thread, for a fork of a
// source with a completed run, an active one and a pending message, and
// after the new thread's own post.
func TestApply_forkedMatchesThread(t *testing.T) {
	var envs []events.Envelope
	add := func(thread string, ev *eventspb.Event) uint64 {
		return appendEnv((*[]events.Envelope)(&envs), thread, ev)
	}
	post := func(thread string) uint64 {
		return add(thread, &eventspb.Event{Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: fmt.Sprintf("m%d", len(envs)+1)}}})
	}
	of := func(thread string) []events.Envelope {
		var out []events.Envelope
		for _, e := range envs {
			if e.Thread == thread {
				out = append(out, e)
			}
		}
		return out
	}
	m1 := post("S")
	c := events.Claim{Thread: "S", Holder: "h", Seq: add("S", &eventspb.Event{Holder: "h", Body: &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{Holder: "h"}}})}
	add("S", events.NewRunStarted(c, time.Time{}, "r1", m1, "echo"))
	add("S", events.NewRunCompleted(c, time.Time{}, "r1", "ok"))
	m2 := post("S")
	add("S", events.NewRunStarted(c, time.Time{}, "r2", m2, "echo"))
	post("S")
	src := projections.Fold("S", of("S"))
	add("N", events.NewThreadForked("N", time.Time{}, projections.ForkBody(src, src.LastSeq)))
	for _, upTo := range []int{1, 2} {
		if upTo == 2 {
			post("N")
		}
		got := Fold("N", of("N"))
		want := FromThread(projections.Fold("N", of("N")))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("after %d events of N:\n got %+v\nwant %+v", upTo, got, want)
		}
		if got.Anomalies != 0 || got.Messages != 3+upTo-1 || got.LastRunStatus != string(projections.RunAbandoned) {
			t.Errorf("summary %+v", got)
		}
	}
}

// envLoader is an events.Loader over envs, the store a fork by reference
// is resolved from.
type envLoader []events.Envelope

func (l envLoader) Load(_ context.Context, thread string, from uint64) ([]events.Envelope, error) {
	var out []events.Envelope
	for _, e := range l {
		if e.Thread == thread && e.Seq >= from {
			out = append(out, e)
		}
	}
	return out, nil
}

// TestApply_referenceForkMatchesCopied: the summary of a fork by reference,
// resolved as the projector resolves it, counts the history the copied form
// carries: the same messages, taken cursor, runs and last run.
func TestApply_referenceForkMatchesCopied(t *testing.T) {
	var envs envLoader
	add := func(thread string, ev *eventspb.Event) uint64 {
		return appendEnv((*[]events.Envelope)(&envs), thread, ev)
	}
	post := func(thread string) uint64 {
		return add(thread, &eventspb.Event{Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: fmt.Sprintf("m%d", len(envs)+1)}}})
	}
	m1 := post("S")
	c := events.Claim{Thread: "S", Holder: "h", Seq: add("S", &eventspb.Event{Holder: "h", Body: &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{Holder: "h"}}})}
	add("S", events.NewRunStarted(c, time.Time{}, "r1", m1, "echo"))
	post("S")
	at := add("S", events.NewRunOutput(c, time.Time{}, "r1", "half"))
	src, _ := envs.Load(context.Background(), "S", 1)
	add("C", events.NewThreadForked("C", time.Time{}, projections.ForkBody(projections.Fold("S", src), at)))
	add("R", events.NewThreadForked("R", time.Time{}, &eventspb.ThreadForked{SourceThread: "S", SourceSeq: at, Reference: true}))
	sum := func(thread string) Summary {
		t.Helper()
		e, _ := envs.Load(context.Background(), thread, 1)
		if err := projections.ResolveFirst(context.Background(), envs, e); err != nil {
			t.Fatal(err)
		}
		s := Fold(thread, e)
		if want := FromThread(projections.Fold(thread, e)); !reflect.DeepEqual(s, want) {
			t.Errorf("%s: summary %+v, thread's %+v", thread, s, want)
		}
		return s
	}
	copied, ref := sum("C"), sum("R")
	// Only the thread and its own event's sequence and time differ.
	copied.Thread, copied.LastSeq, copied.LastActivity, copied.Created = ref.Thread, ref.LastSeq, ref.LastActivity, ref.Created
	if !reflect.DeepEqual(copied, ref) || ref.Messages != 2 || ref.Runs != 1 || ref.LastRunStatus != string(projections.RunAbandoned) {
		t.Errorf("reference fork's summary %+v, copied form's %+v", ref, copied)
	}
}

// appendEnv stores ev in thread as the next envelope of *envs and returns
// its sequence.
func appendEnv(envs *[]events.Envelope, thread string, ev *eventspb.Event) uint64 {
	seq := uint64(len(*envs) + 1)
	ev.Thread = thread
	typ := events.TypeOf(ev)
	*envs = append(*envs, events.Envelope{Seq: seq, Thread: thread, Kind: typ.Kind(), Type: typ, Event: ev, Stored: time.Unix(int64(seq), 0)})
	return seq
}
