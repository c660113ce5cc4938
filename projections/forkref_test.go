package projections

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// Load makes forkLog an events.Loader, the store a fork is resolved from.
func (l *forkLog) Load(_ context.Context, thread string, from uint64) ([]events.Envelope, error) {
	var out []events.Envelope
	for _, e := range l.of(thread) {
		if e.Seq >= from {
			out = append(out, e)
		}
	}
	return out, nil
}

// refFork appends a fork by reference of src at seq into thread.
func (l *forkLog) refFork(thread, src string, seq uint64) uint64 {
	return l.add(thread, events.NewThreadForked(thread, time.Time{}, &eventspb.ThreadForked{SourceThread: src, SourceSeq: seq, Reference: true}))
}

// resolved folds thread's events with its fork resolved from l.
func resolved(t *testing.T, l *forkLog, thread string) *Thread {
	t.Helper()
	envs := l.of(thread)
	if err := ResolveFirst(context.Background(), l, envs); err != nil {
		t.Fatalf("resolve %s: %v", thread, err)
	}
	return Fold(thread, envs)
}

// sameButFork compares two folds of a fork, one of each form: everything
// but Fork.Reference must be equal.
func sameButFork(t *testing.T, copied, ref *Thread) {
	t.Helper()
	if ref.Fork == nil || !ref.Fork.Reference || ref.Fork.Unresolved {
		t.Fatalf("reference fork %+v", ref.Fork)
	}
	c := ref.Clone()
	c.Fork = &Fork{Source: ref.Fork.Source, SourceSeq: ref.Fork.SourceSeq, Seq: ref.Fork.Seq}
	c.ID = copied.ID
	if !reflect.DeepEqual(copied, c) {
		t.Errorf("the forms fold apart:\ncopied    %+v\nreference %+v", copied, c)
	}
}

// A fork by reference, resolved, folds as the copied form of the same
// history, a forged run taking a message of that history included: I1 in
// both, at the same message.
// Spec: I1_ConsumedAtMostOnce.
func TestResolveFork_foldsAsCopied(t *testing.T) {
	l := &forkLog{}
	s := source(l)
	at := s.LastSeq
	l.add("C", events.NewThreadForked("C", time.Time{}, ForkBody(s, at)))
	l.refFork("R", "S", at)
	for _, th := range []string{"C", "R"} {
		l.post(th, "four")
		c := events.Claim{Thread: th, Holder: "h", Seq: l.add(th, &eventspb.Event{Holder: "h", Body: &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{Holder: "h"}}})}
		l.add(th, events.NewRunStarted(c, time.Time{}, "rx", s.Messages[0].Seq, "echo")) // a message of the history
	}
	copied, ref := resolved(t, l, "C"), resolved(t, l, "R")
	if len(copied.Anomalies) != 1 || !strings.Contains(copied.Anomalies[0].Reason, "I1") {
		t.Fatalf("copied form's anomalies %+v, want one I1", copied.Anomalies)
	}
	if ref.Anomalies[0].Reason != strings.Replace(copied.Anomalies[0].Reason, "consumed at "+strconv.FormatUint(copied.Fork.Seq, 10), "consumed at "+strconv.FormatUint(ref.Fork.Seq, 10), 1) {
		t.Errorf("reference anomaly %q, copied %q", ref.Anomalies[0].Reason, copied.Anomalies[0].Reason)
	}
	// The two forks differ in their own sequences; compare each against
	// the fold of the same log with the other form's event put in.
	l2 := &forkLog{}
	s2 := source(l2)
	l2.add("C", events.NewThreadForked("C", time.Time{}, ForkBody(s2, at)))
	l3 := &forkLog{}
	source(l3)
	l3.refFork("C", "S", at)
	sameButFork(t, resolved(t, l2, "C"), resolved(t, l3, "C"))
}

// A fork of a fork by reference has the first source's history, as a
// copy of a copy does: the middle fork's own messages after its fork too.
func TestResolveFork_forkOfFork(t *testing.T) {
	l := &forkLog{}
	s := source(l)
	l.refFork("M", "S", s.LastSeq)
	own := l.post("M", "m-own")
	l.refFork("N", "M", own)
	mine := l.post("N", "n-own")
	n := resolved(t, l, "N")
	if len(n.Anomalies) != 0 {
		t.Fatalf("anomalies %+v", n.Anomalies)
	}
	if len(n.Messages) != 5 || n.Messages[3].Seq != own || n.Messages[4].Seq != mine {
		t.Fatalf("messages %+v", n.Messages)
	}
	for _, m := range n.Messages[:4] {
		if m.Consumed == nil || m.Consumed.Kind != ConsumedForked {
			t.Errorf("history message %d consumed %+v", m.Seq, m.Consumed)
		}
	}
	if p, ok := n.OldestPending(); !ok || p.Seq != mine {
		t.Errorf("oldest pending %+v", p)
	}
	if len(n.Runs) != 2 || n.Runs[1].Status != RunAbandoned || n.ActiveRun != nil {
		t.Errorf("runs %+v", n.Runs)
	}
	if got := n.HistoryTail(mine, 2); len(got) != 2 || got[0].Text != "three" || got[1].Text != "m-own" {
		t.Errorf("history tail %+v", got)
	}
}

// A reference to a sequence that is no event of the source, and one that
// carries a copy besides, are bad bodies: anomalies, nothing applied. An
// unresolved reference folds with no history and says so.
func TestResolveFork_badAndUnresolved(t *testing.T) {
	l := &forkLog{}
	s := source(l)
	other := l.post("X", "elsewhere") // a sequence of another thread
	l.refFork("A", "S", other)
	l.add("B", events.NewThreadForked("B", time.Time{}, &eventspb.ThreadForked{SourceThread: "S", SourceSeq: s.LastSeq, Reference: true,
		Messages: []*eventspb.ForkedMessage{{Seq: 1}}}))
	l.refFork("U", "S", s.LastSeq)
	for th, want := range map[string]string{"A": "not an event of S", "B": "carries 1 messages"} {
		f := resolved(t, l, th)
		if f.Fork != nil || len(f.Anomalies) != 1 || !strings.Contains(f.Anomalies[0].Reason, want) {
			t.Errorf("%s: fork %+v, anomalies %+v; want one saying %q", th, f.Fork, f.Anomalies, want)
		}
	}
	u := Fold("U", l.of("U"))
	if u.Fork == nil || !u.Fork.Unresolved || len(u.Messages) != 0 || len(u.Anomalies) != 0 {
		t.Errorf("unresolved: fork %+v, messages %d, anomalies %+v", u.Fork, len(u.Messages), u.Anomalies)
	}
}

// A snapshot of a resolved fork holds its history: plus the tail, it folds
// as the whole log does.
func TestResolveFork_snapshot(t *testing.T) {
	l := &forkLog{}
	s := source(l)
	l.refFork("R", "S", s.LastSeq)
	l.post("R", "four")
	envs := l.of("R")
	if err := ResolveFirst(context.Background(), l, envs); err != nil {
		t.Fatal(err)
	}
	head := Fold("R", envs[:1])
	data, err := head.EncodeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSnapshot("R", data)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range envs[1:] {
		got.Apply(e)
	}
	want := Fold("R", envs)
	got.next, want.next = 0, 0 // a hint
	if !reflect.DeepEqual(got, want) {
		t.Errorf("snapshot plus tail:\n%+v\nwhole log:\n%+v", got, want)
	}
}

// snapLog is a forkLog that keeps snapshots, as natsstore does.
type snapLog struct {
	*forkLog
	snaps map[string][]byte
}

func (l snapLog) SaveSnapshot(_ context.Context, thread string, data []byte) error {
	l.snaps[thread] = data
	return nil
}

func (l snapLog) LoadSnapshot(_ context.Context, thread string) ([]byte, error) {
	return l.snaps[thread], nil
}

// The history of a fork is read from the source's snapshot when it is
// from before the fork's source sequence, plus the events after it; a
// snapshot at or past that sequence, or damaged, is ignored.
func TestSourceAt_fromSnapshot(t *testing.T) {
	l := snapLog{&forkLog{}, map[string][]byte{}}
	early := Fold("S", nil)
	m1 := l.post("S", "one")
	early.Apply(l.envs[0])
	early.Messages[0].Text = "marked" // verifies, but is not the log: shows it was read
	data, err := early.EncodeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	m2 := l.post("S", "two")
	text := func(seq uint64) string {
		t.Helper()
		th, found, err := SourceAt(context.Background(), l, "S", seq)
		if err != nil || !found {
			t.Fatalf("SourceAt %d: found %v, %v", seq, found, err)
		}
		return th.Messages[0].Text + "," + th.Messages[len(th.Messages)-1].Text
	}
	l.snaps["S"] = data
	if got := text(m2); got != "marked,two" {
		t.Errorf("from the snapshot: %q", got)
	}
	if th, _, _ := SourceAt(context.Background(), LogOnly(l), "S", m2); th.Messages[0].Text != "one" {
		t.Errorf("LogOnly read the snapshot: %q", th.Messages[0].Text)
	}
	if got := text(m1); got != "one,one" {
		t.Errorf("at the snapshot's own sequence: %q, want the log", got)
	}
	if _, found, _ := SourceAt(context.Background(), l, "S", m2+5); found {
		t.Error("a sequence past the source's events was found")
	}
	l.snaps["S"] = []byte(`{"v":1}`)
	if got := text(m2); got != "one,two" {
		t.Errorf("damaged snapshot: %q, want the log", got)
	}
}
