package eventstest

import (
	"context"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/internal/unfence"
)

// Unfenced wraps s so that consuming appends carry no fence. It exists only to
// prove that the safety tests fail without the fence. It is the only way to
// switch the unfenced mode on (for every store in the process, from the first
// call): stores refuse [events.CheckUnfencedForTest] until then, and a
// production binary never imports this package.
func Unfenced(s events.Store) events.Store {
	unfence.Allow()
	return unfenced{s}
}

// AllowUnfenced lets stores accept [events.CheckUnfencedForTest] from
// appends that a test makes itself, without the [Unfenced] wrapper.
func AllowUnfenced() { unfence.Allow() }

type unfenced struct{ events.Store }

func (u unfenced) Append(ctx context.Context, ev *eventspb.Event, chk events.Check, opts ...events.AppendOption) (events.Ack, error) {
	if chk.Mode == events.CheckFence {
		// No fence and no guard: the mutation drops every check a
		// consuming append carries (the guard would catch some of what
		// the fence does).
		chk = events.Check{Mode: events.CheckUnfencedForTest, Seq: chk.Seq}
	}
	return u.Store.Append(ctx, ev, chk, opts...)
}
