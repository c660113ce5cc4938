package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
)

// ErrNoEvents is returned by [Client.Thread] and [Client.Fork] for a
// thread with no events at all: most often a mistyped id.
var ErrNoEvents = errors.New("client: thread has no events")

// ThreadOption picks the point in the log [Client.Thread] folds up to.
type ThreadOption func(*threadOptions)

type threadOptions struct {
	seq  uint64
	at   time.Time
	keep func(events.Envelope) bool
}

// AtSeq folds only the events with stream sequence <= seq: the thread as it
// was then.
func AtSeq(seq uint64) ThreadOption { return func(o *threadOptions) { o.seq = seq } }

// AtTime folds only the events the server stored at or before t.
func AtTime(t time.Time) ThreadOption { return func(o *threadOptions) { o.at = t } }

// Filter folds only the events keep accepts, such as a filter on stored
// time or sequence that AtSeq and AtTime do not express.
func Filter(keep func(events.Envelope) bool) ThreadOption {
	return func(o *threadOptions) { o.keep = keep }
}

// Thread returns the fold of thread's events (see projections.Thread): its
// messages and how each was consumed, its runs with their outputs, its
// claim, open requests and anomalies, and the fork it was copied from. With
// AtSeq or AtTime, the fold stops there; a thread that has events, but none
// by then, folds to its empty state. A thread with no events at all is an
// error wrapping [ErrNoEvents].
func (c *Client) Thread(ctx context.Context, thread string, opts ...ThreadOption) (*projections.Thread, error) {
	var o threadOptions
	for _, opt := range opts {
		opt(&o)
	}
	envs, err := c.load(ctx, thread)
	if err != nil {
		return nil, err
	}
	t := projections.New(thread)
	for _, env := range envs {
		if (o.seq != 0 && env.Seq > o.seq) || (!o.at.IsZero() && env.Stored.After(o.at)) || (o.keep != nil && !o.keep(env)) {
			continue
		}
		t.Apply(env)
	}
	return t, nil
}

// load returns every event of thread, or an error wrapping ErrNoEvents.
func (c *Client) load(ctx context.Context, thread string) ([]events.Envelope, error) {
	envs, err := c.store.Load(ctx, thread, 1)
	if err != nil {
		return nil, fmt.Errorf("client: load %s: %w", thread, err)
	}
	if len(envs) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoEvents, thread)
	}
	return envs, nil
}
