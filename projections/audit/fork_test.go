package audit

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
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
