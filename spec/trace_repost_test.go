package spec

import (
	"slices"
	"testing"

	"github.com/artifactr/artifactr/events/eventspb"
)

// A post of a message id the thread has is no message (projections.Rules):
// no Post action, so it conforms untaken, and a run that takes it consumes
// no pending message.
func TestTrace_repostIsNoMessage(t *testing.T) {
	repost := func(l *tlog, id string) uint64 {
		return l.add(&eventspb.Event{Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: id}}})
	}
	l := newLog()
	m := repost(l, "m1")
	l.claim("A")
	l.start("A", "r1", m)
	l.end("A", "r1")
	dup := repost(l, "m1")
	if r := validate(*l.envs); len(r.Nonconforming) != 0 {
		t.Fatalf("an untaken repost: %+v", r.Nonconforming)
	}
	l.start("A", "r2", dup)
	r := validate(*l.envs)
	if len(r.Nonconforming) != 1 || r.Nonconforming[0].Seq != dup+1 || !slices.Contains(r.Nonconforming[0].Checks, "I1_ConsumedAtMostOnce") ||
		r.Nonconforming[0].Model == "" {
		t.Fatalf("a run took a repost: %+v, want its run_started flagged by I1 and the model (nothing pending)", r.Nonconforming)
	}
}
