package projections

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// forkLog builds envelopes by hand: the source thread S and a fork N.
type forkLog struct{ envs []events.Envelope }

func (l *forkLog) add(thread string, ev *eventspb.Event) uint64 {
	seq := uint64(len(l.envs) + 1)
	ev.Thread = thread
	typ := events.TypeOf(ev)
	l.envs = append(l.envs, events.Envelope{Seq: seq, Thread: thread, Kind: typ.Kind(), Type: typ, Event: ev, Stored: time.Unix(int64(seq), 0).UTC()})
	return seq
}

func (l *forkLog) post(thread, text string) uint64 {
	return l.add(thread, &eventspb.Event{Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: text, Text: text}}})
}

func (l *forkLog) of(thread string) []events.Envelope {
	var out []events.Envelope
	for _, e := range l.envs {
		if e.Thread == thread {
			out = append(out, e)
		}
	}
	return out
}

// source writes S: m1 answered by a completed run, m2 prompting an active
// run with an output, m3 pending. It returns the fold of S.
func source(l *forkLog) *Thread {
	m1 := l.post("S", "one")
	c := events.Claim{Thread: "S", Holder: "h", Seq: l.add("S", &eventspb.Event{Holder: "h", Body: &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{Holder: "h"}}})}
	l.add("S", events.NewRunStarted(c, time.Time{}, "r1", m1, "echo"))
	l.add("S", events.NewRunCompleted(c, time.Time{}, "r1", "done one"))
	m2 := l.post("S", "two")
	l.add("S", events.NewRunStarted(c, time.Time{}, "r2", m2, "echo"))
	l.add("S", events.NewRunOutput(c, time.Time{}, "r2", "half"))
	l.post("S", "three")
	return Fold("S", l.of("S"))
}

func TestThread_forked(t *testing.T) {
	l := &forkLog{}
	s := source(l)
	at := s.LastSeq
	fork := l.add("N", events.NewThreadForked("N", time.Time{}, ForkBody(s, at)))
	p := l.post("N", "four")
	n := Fold("N", l.of("N"))
	if len(n.Anomalies) != 0 {
		t.Fatalf("anomalies %+v", n.Anomalies)
	}
	if n.Fork == nil || *n.Fork != (Fork{Source: "S", SourceSeq: at, Seq: fork}) {
		t.Errorf("fork %+v", n.Fork)
	}
	if len(n.Messages) != 4 {
		t.Fatalf("messages %+v", n.Messages)
	}
	for _, m := range n.Messages[:3] {
		if m.Consumed == nil || m.Consumed.Kind != ConsumedForked || m.Consumed.Seq != fork {
			t.Errorf("copied message %d consumed %+v, want forked at %d", m.Seq, m.Consumed, fork)
		}
	}
	if pend := n.Pending(); len(pend) != 1 || pend[0].Seq != p {
		t.Errorf("pending %+v, want only %d", pend, p)
	}
	if n.ActiveRun != nil || len(n.Runs) != 2 {
		t.Fatalf("active %v, runs %d", n.ActiveRun, len(n.Runs))
	}
	if r := n.Runs[0]; r.Status != RunCompleted || r.Output != "done one" || r.StartSeq != 0 || r.EndSeq != fork {
		t.Errorf("run 1 %+v", r)
	}
	if r := n.Runs[1]; r.Status != RunAbandoned || len(r.Outputs) != 1 || !strings.Contains(r.Reason, "a fork carries no run over") {
		t.Errorf("run 2 %+v", r)
	}

	// A snapshot of the fork, plus the events after it, is the full fold.
	head := Fold("N", l.of("N")[:1])
	data, err := head.EncodeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := DecodeSnapshot("N", data)
	if err != nil {
		t.Fatal(err)
	}
	snap.Apply(l.of("N")[1])
	if snap.Fork == nil || *snap.Fork != *n.Fork || len(snap.Messages) != 4 || len(snap.Pending()) != 1 {
		t.Errorf("snapshot fold %+v", snap)
	}
}

// TestThread_forked_copiedMessageConsumedAgain: consuming a copied message
// in the new thread is an I1 anomaly.
func TestThread_forked_copiedMessageConsumedAgain(t *testing.T) {
	l := &forkLog{}
	s := source(l)
	l.add("N", events.NewThreadForked("N", time.Time{}, ForkBody(s, s.LastSeq)))
	c := events.Claim{Thread: "N", Holder: "h2", Seq: l.add("N", &eventspb.Event{Holder: "h2", Body: &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{Holder: "h2"}}})}
	pending := s.Pending()[0].Seq // pending in S, history in N
	bad := l.add("N", events.NewRunStarted(c, time.Time{}, "r9", pending, "echo"))
	n := Fold("N", l.of("N"))
	if len(n.Anomalies) != 1 || n.Anomalies[0].Seq != bad || !strings.Contains(n.Anomalies[0].Reason, "I1") {
		t.Errorf("anomalies %+v, want I1 at %d", n.Anomalies, bad)
	}
}

// TestThread_forked_refused: a fork that is not the thread's first event,
// or whose body breaks the rules, is an anomaly and changes nothing.
func TestThread_forked_refused(t *testing.T) {
	body := func(mut func(b *eventspb.ThreadForked)) *eventspb.ThreadForked {
		b := &eventspb.ThreadForked{SourceThread: "S", SourceSeq: 2, Messages: []*eventspb.ForkedMessage{
			{Seq: 1, Text: "a", Posted: timestamppb.New(time.Unix(1, 0))}, {Seq: 2, Text: "b"}}}
		if mut != nil {
			mut(b)
		}
		return b
	}
	for _, tc := range []struct {
		name   string
		before bool // a post precedes the fork
		b      *eventspb.ThreadForked
		want   string
	}{
		{"not first", true, body(nil), "not the thread's first event"},
		{"into itself", false, body(func(b *eventspb.ThreadForked) { b.SourceThread = "N" }), "source thread"},
		{"bad source", false, body(func(b *eventspb.ThreadForked) { b.SourceThread = "a.b" }), "source thread"},
		{"seq zero", false, body(func(b *eventspb.ThreadForked) { b.SourceSeq = 0 }), "not an earlier event"},
		{"seq not earlier", false, body(func(b *eventspb.ThreadForked) { b.SourceSeq = 99 }), "not an earlier event"},
		{"out of order", false, body(func(b *eventspb.ThreadForked) { b.Messages[0].Seq = 3; b.SourceSeq = 3 }), "out of order"},
		{"past source seq", false, body(func(b *eventspb.ThreadForked) { b.SourceSeq = 1 }), "out of order or past"},
		{"bad run status", false, body(func(b *eventspb.ThreadForked) {
			b.Runs = []*eventspb.ForkedRun{{RunId: "r", Status: "sleeping"}}
		}), "status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &forkLog{}
			l.post("S", "a")
			l.post("S", "b")
			l.post("X", "padding") // the fork lands at a later sequence
			if tc.before {
				l.post("N", "early")
			}
			seq := l.add("N", events.NewThreadForked("N", time.Time{}, tc.b))
			n := Fold("N", l.of("N"))
			if len(n.Anomalies) != 1 || n.Anomalies[0].Seq != seq || !strings.Contains(n.Anomalies[0].Reason, tc.want) {
				t.Fatalf("anomalies %+v, want %q at %d", n.Anomalies, tc.want, seq)
			}
			if n.Fork != nil || len(n.Runs) != 0 || (tc.before && len(n.Pending()) != 1) || (!tc.before && len(n.Messages) != 0) {
				t.Errorf("a refused fork changed the state: %+v", n)
			}
		})
	}
}
