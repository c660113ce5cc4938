package eventstest

import (
	"errors"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
)

// RunGuarded runs the contract of guarded consuming appends
// ([events.FencedGuarded]) against a store h opens that guards (memstore
// always does; natsstore with Config.Guard on): the append lands while the
// run subject is where the writer read it; it is refused with
// [events.ErrRunMoved], wrapped with [events.ErrConflict], and writes
// nothing once another run event landed (issue 23: a forgery in the
// holder's window); a lost fence is still [events.ErrThreadBusy]; and a
// retry with the same msg id after it landed returns the original.
// Spec: AppendFenced, I1_ConsumedAtMostOnce, I3_OneActiveRun.
func RunGuarded(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"GuardedLandsAndRefuses", testGuardedLandsAndRefuses},
		{"GuardedForgeryInWindow", testGuardedForgeryInWindow},
		{"GuardedRetrySameMsgID", testGuardedRetrySameMsgID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

func runLast(t *testing.T, s events.LastSeqReader, thread string) uint64 {
	t.Helper()
	n, err := s.LastSeq(ctxT(t), thread, events.KindRun)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func testGuardedLandsAndRefuses(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	m1 := post(t, s, th, "m1", "one")
	m2 := post(t, s, th, "m2", "two")
	c, _ := claim(t, s, th, "A", time.Now())
	ack, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m1, "a"), events.FencedGuarded(c, runLast(t, s, th)))
	if err != nil {
		t.Fatalf("guarded run_started: %v", err)
	}
	before := runLast(t, s, th)
	if before != ack.Seq {
		t.Fatalf("run subject at %d, want %d", before, ack.Seq)
	}
	_, err = s.Append(ctxT(t), events.NewSteeringGiven(c, time.Now(), "r1", m2), events.FencedGuarded(c, ack.Seq-1))
	if !errors.Is(err, events.ErrRunMoved) || !errors.Is(err, events.ErrConflict) || errors.Is(err, events.ErrThreadBusy) {
		t.Fatalf("guarded append expecting a stale run seq: %v, want ErrRunMoved and ErrConflict", err)
	}
	if got := runLast(t, s, th); got != before {
		t.Fatalf("a refused guarded append wrote: run subject at %d, was %d", got, before)
	}
	// A newer claim: the fence refuses, whatever the run subject says.
	b, _ := takeover(t, h, th)
	_, err = s.Append(ctxT(t), events.NewSteeringGiven(c, time.Now(), "r1", m2), events.FencedGuarded(c, before))
	if !errors.Is(err, events.ErrThreadBusy) || errors.Is(err, events.ErrRunMoved) {
		t.Fatalf("guarded append under claim %d after claim %d: %v, want ErrThreadBusy", c.Seq, b.Seq, err)
	}
	_, err = s.Append(ctxT(t), events.NewSteeringGiven(c, time.Now(), "r1", m2), events.FencedGuarded(c, 0))
	if !errors.Is(err, events.ErrThreadBusy) {
		t.Fatalf("guarded append with both checks stale: %v, want ErrThreadBusy (the fence first)", err)
	}
}

// takeover claims th for B from a handle of its own, its lease lapsed by
// B's clock.
func takeover(t *testing.T, h Harness, th string) (events.Claim, []events.Envelope) {
	t.Helper()
	b := h.Open(t, func() time.Time { return time.Now().Add(2 * TTL) })
	return claim(t, b, th, "B", time.Now().Add(2*TTL))
}

// A forger with the holder's claim stores a consuming event after the
// holder read the thread; the holder's guarded consuming append from that
// read is refused, and the log holds one consumption of the message.
func testGuardedForgeryInWindow(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	f := h.Open(t, time.Now)
	th := NewThread(t)
	m := post(t, s, th, "m1", "one")
	c, _ := claim(t, s, th, "A", time.Now())
	read := runLast(t, s, th) // the holder's read
	if _, err := f.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "forged", m, "evil"), events.Fenced(c)); err != nil {
		t.Fatalf("forge: %v", err)
	}
	_, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "a"), events.FencedGuarded(c, read))
	if !errors.Is(err, events.ErrRunMoved) {
		t.Fatalf("the holder's start after a forged one in its window: %v, want ErrRunMoved", err)
	}
	starts := 0
	for _, e := range load(t, s, th) {
		if e.Type == events.TypeRunStarted {
			starts++
		}
	}
	if starts != 1 {
		t.Fatalf("%d run_started in the log, want the forged one only", starts)
	}
}

func testGuardedRetrySameMsgID(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	m := post(t, s, th, "m1", "one")
	c, _ := claim(t, s, th, "A", time.Now())
	ev := events.NewRunStarted(c, time.Now(), "r1", m, "a")
	chk := events.FencedGuarded(c, runLast(t, s, th))
	first, err := s.Append(ctxT(t), ev, chk, events.WithMsgID(th+":rs1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Append(ctxT(t), ev, chk, events.WithMsgID(th+":rs1"))
	if err != nil || again.Seq != first.Seq || !again.Duplicate {
		t.Fatalf("retry of a guarded append that landed: %+v %v, want a duplicate of %d", again, err, first.Seq)
	}
}
