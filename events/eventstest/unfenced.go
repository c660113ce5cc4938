package eventstest

import (
	"context"

	"artifactr/events"
	"artifactr/events/eventspb"
)

// Unfenced wraps s so that consuming appends carry no fence. It exists only to
// prove that the safety tests fail without the fence; stores refuse it
// outside test binaries.
func Unfenced(s events.Store) events.Store { return unfenced{s} }

type unfenced struct{ events.Store }

func (u unfenced) Append(ctx context.Context, ev *eventspb.Event, chk events.Check, opts ...events.AppendOption) (events.Ack, error) {
	if chk.Mode == events.CheckFence {
		chk.Mode = events.CheckUnfencedForTest
	}
	return u.Store.Append(ctx, ev, chk, opts...)
}
