package projections

import (
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/eventgen"
)

// Markers may be on the run subject (the RUNFENCE layout), and nowhere else
// but their own claim subject; every other type only on its own.
func TestMalformed_markerSubjects(t *testing.T) {
	w := eventgen.Writer{Thread: "T", Holder: "A", ClaimSeq: 1}
	tests := []struct {
		ev   *eventspb.Event
		kind events.Kind
		ok   bool
	}{
		{w.Claimed(1), events.KindClaim, true},
		{w.Claimed(1), events.KindRun, true},
		{w.Released(), events.KindRun, true},
		{w.Claimed(1), events.KindPosted, false},
		{w.Released(), events.KindPosted, false},
		{w.Started("r", 1), events.KindClaim, false},
		{w.Output("r", "o"), events.KindClaim, false},
		{eventgen.Writer{Thread: "T"}.Post("a", "x"), events.KindRun, false},
	}
	for _, tc := range tests {
		typ := events.TypeOf(tc.ev)
		env := &events.Envelope{Thread: "T", Kind: tc.kind, Type: typ, Event: tc.ev}
		if got := Malformed(env, typ, "T") == ""; got != tc.ok {
			t.Errorf("%s on the %s subject: well-formed %v, want %v", typ, tc.kind, got, tc.ok)
		}
	}
}

// The thread fold takes markers from the run subject, and they move the
// run subject's last sequence, the holder's K.
func TestThread_Apply_runSubjectMarkers(t *testing.T) {
	w := eventgen.Writer{Thread: "T", Holder: "A"}
	th := New("T")
	mk := func(seq uint64, kind events.Kind, ev *eventspb.Event) events.Envelope {
		return events.Envelope{Seq: seq, Thread: "T", Kind: kind, Type: events.TypeOf(ev), Stored: eventgen.Stored(seq), ExpectSeq: seq - 1, Event: ev}
	}
	th.Apply(mk(1, events.KindPosted, eventgen.Writer{Thread: "T"}.Post("a", "x")))
	th.Apply(mk(2, events.KindRun, w.Claimed(1)))
	w.ClaimSeq = 2
	th.Apply(mk(3, events.KindRun, w.Started("r1", 1)))
	th.Apply(mk(4, events.KindRun, w.Completed("r1")))
	th.Apply(mk(5, events.KindRun, w.Released()))
	if len(th.Anomalies) != 0 {
		t.Fatalf("anomalies: %+v", th.Anomalies)
	}
	if th.Claim.Seq != 2 || th.Claim.Holder != "A" || !th.Claim.Released || th.LastRunSubjectSeq != 5 || th.LastClaimSubjectSeq != 0 {
		t.Errorf("Claim %+v, LastRunSubjectSeq %d, LastClaimSubjectSeq %d; want claim 2 by A released, 5, 0",
			th.Claim, th.LastRunSubjectSeq, th.LastClaimSubjectSeq)
	}
}
