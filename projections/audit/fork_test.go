package audit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/eventgen"
	"github.com/artifactr/artifactr/projections"
)

func forkEnv(seq uint64, thread, source string, at uint64, msgs ...uint64) events.Envelope {
	b := &eventspb.ThreadForked{SourceThread: source, SourceSeq: at}
	for _, m := range msgs {
		b.Messages = append(b.Messages, &eventspb.ForkedMessage{Seq: m})
	}
	ev := events.NewThreadForked(thread, time.Time{}, b)
	return events.Envelope{Seq: seq, Thread: thread, Kind: events.KindPosted, Type: events.TypeThreadForked,
		Subject: "threads." + thread + ".posted", Event: ev}
}

func postEnv(seq uint64, thread string) events.Envelope {
	ev := &eventspb.Event{Thread: thread, Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: fmt.Sprintf("m%d", seq)}}}
	return events.Envelope{Seq: seq, Thread: thread, Kind: events.KindPosted, Type: events.TypeMessagePosted, Event: ev}
}

// TestAuditor_forked: an honest fork is clean; a fork that is not first,
// was appended without its check, or copies a message its source did not
// post is an anomaly.
func TestAuditor_forked(t *testing.T) {
	run := func(envs ...events.Envelope) Report {
		a := New()
		for _, e := range envs {
			a.Add(e)
		}
		return a.Report()
	}
	if r := run(postEnv(1, "S"), postEnv(2, "S"), forkEnv(3, "N", "S", 2, 1, 2), postEnv(4, "N")); r.AnomalyCount != 0 || r.ViolationCount != 0 {
		t.Errorf("honest fork: %+v", r)
	}
	noCheck := forkEnv(3, "N", "S", 2, 1, 2)
	noCheck.ExpectSeq = 7
	for name, tc := range map[string]struct {
		envs []events.Envelope
		want string
	}{
		"not first":       {[]events.Envelope{postEnv(1, "S"), postEnv(2, "N"), forkEnv(3, "N", "S", 1, 1)}, "not the thread's first event"},
		"second fork":     {[]events.Envelope{postEnv(1, "S"), forkEnv(2, "N", "S", 1, 1), forkEnv(3, "N", "S", 1, 1)}, "not the thread's first event"},
		"without check":   {[]events.Envelope{postEnv(1, "S"), postEnv(2, "S"), noCheck}, "not an empty posted subject"},
		"unknown message": {[]events.Envelope{postEnv(1, "S"), postEnv(2, "X"), forkEnv(3, "N", "S", 2, 1, 2)}, "which S did not post"},
		"out of order":    {[]events.Envelope{postEnv(1, "S"), postEnv(2, "S"), forkEnv(3, "N", "S", 2, 2, 1)}, "out of order"},
	} {
		r := run(tc.envs...)
		if r.AnomalyCount != 1 || !strings.Contains(r.Anomalies[0].Message, tc.want) {
			t.Errorf("%s: anomalies %+v, want %q", name, r.Anomalies, tc.want)
		}
	}
}

// logLoader is an events.Loader over an eventgen log: the store a fork by
// reference is resolved from.
type logLoader struct{ l *eventgen.Log }

func (s logLoader) Load(_ context.Context, thread string, from uint64) ([]events.Envelope, error) {
	var out []events.Envelope
	for _, e := range s.l.Envs {
		if e.Thread == thread && e.Seq >= from {
			out = append(out, e)
		}
	}
	return out, nil
}

// forkAndRun writes S (two messages, the first run), a fork N of S by
// reference (or copied) at S's last event, then a run in N whose prompt is
// prompt(history messages, N's own message). It audits with the fork
// resolved and returns the report.
func forkAndRun(t *testing.T, copied bool, resolve bool, prompt func(hist []uint64, own uint64) uint64) Report {
	t.Helper()
	l := eventgen.NewLog()
	s := eventgen.Writer{Thread: "S"}
	m1 := l.Post(s.Post("a", "hi")).Seq
	m2 := l.Post(s.Post("b", "there")).Seq
	a := eventgen.Writer{Thread: "S", Holder: "A"}
	a.ClaimSeq = l.CAS(a.Claimed(1)).Seq
	l.Fenced(a.Started("r1", m1))
	at := l.CAS(a.Completed("r1")).Seq
	b := &eventspb.ThreadForked{SourceThread: "S", SourceSeq: at, Reference: true}
	if copied {
		src := projections.Fold("S", logLoader{l}.of("S"))
		b = projections.ForkBody(src, at)
	}
	l.CAS(events.NewThreadForked("N", time.Time{}, b))
	own := l.Post(eventgen.Writer{Thread: "N"}.Post("c", "mine")).Seq
	n := eventgen.Writer{Thread: "N", Holder: "B"}
	n.ClaimSeq = l.CAS(n.Claimed(1)).Seq
	l.Fenced(n.Started("r2", prompt([]uint64{m1, m2}, own)))
	a2 := New()
	for _, env := range l.Envs {
		if resolve {
			if err := projections.ResolveFork(t.Context(), logLoader{l}, &env); err != nil {
				t.Fatal(err)
			}
		}
		a2.Add(env)
	}
	return a2.Report()
}

func (s logLoader) of(thread string) []events.Envelope {
	envs, _ := s.Load(context.Background(), thread, 1)
	return envs
}

// TestAuditor_referenceFork: the audit of a fork by reference, resolved,
// is the copied form's, exactly: clean when the fork's run takes its own
// message; I1 when it takes a message of the history, pending in the
// source or not. Unresolved, the audit says it did not check the history.
// Spec: I1_ConsumedAtMostOnce.
func TestAuditor_referenceFork(t *testing.T) {
	for _, copied := range []bool{true, false} {
		if r := forkAndRun(t, copied, true, func(_ []uint64, own uint64) uint64 { return own }); !r.OK() || r.AnomalyCount != 0 {
			t.Errorf("copied %v: honest fork: %+v", copied, r)
		}
		for i := range 2 {
			r := forkAndRun(t, copied, true, func(hist []uint64, _ uint64) uint64 { return hist[i] })
			if r.ViolationCount != 1 || r.Violations[0].Check != CheckI1 {
				t.Errorf("copied %v: run takes history message %d: %+v", copied, i, r)
			}
		}
	}
	r := forkAndRun(t, false, false, func(_ []uint64, own uint64) uint64 { return own })
	if r.AnomalyCount != 1 || !strings.Contains(r.Anomalies[0].Message, "did not read") {
		t.Errorf("unresolved: %+v", r.Anomalies)
	}
}
