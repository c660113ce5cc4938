package console

import (
	"errors"
	"time"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections"
)

// Observe returns a runner observer that tells next everything and records
// in rc each takeover and each write the store refused: the fence (a newer
// claim marker) or a run-subject compare-and-set (a run already ended or
// abandoned).
func Observe(next runner.Observer, rc *Recent) runner.Observer {
	return &observer{Observer: next, rc: rc}
}

type observer struct {
	runner.Observer
	rc *Recent
}

func (o *observer) Claimed(c events.Claim, takeover bool) {
	o.Observer.Claimed(c, takeover)
	if takeover {
		o.rc.Add(Refusal{Time: time.Now().UTC(), Thread: c.Thread, Holder: c.Holder, ClaimSeq: c.Seq,
			Type: TypeTakeover, Reason: "claimed a thread whose previous claim was never released"})
	}
}

func (o *observer) Appending(c events.Claim, ev *eventspb.Event, view *projections.Thread) func(events.Ack, error) {
	done := o.Observer.Appending(c, ev, view)
	typ := events.TypeOf(ev)
	return func(ack events.Ack, err error) {
		done(ack, err)
		var by, reason string
		switch {
		case err == nil:
			return
		case typ.Fenced() && errors.Is(err, events.ErrThreadBusy):
			by, reason = ByFence, "fence: a newer claim marker holds the thread"
		case errors.Is(err, events.ErrThreadBusy), errors.Is(err, events.ErrConflict):
			by, reason = ByCAS, "compare-and-set: the run subject moved on (the run was abandoned or ended)"
		default:
			return
		}
		o.rc.Add(Refusal{Time: time.Now().UTC(), Thread: c.Thread, Holder: c.Holder, ClaimSeq: c.Seq, Type: string(typ), By: by, Reason: reason})
	}
}
