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
// claim, open requests and anomalies, and the fork it started from, with
// that fork's history read from its source (projections.ResolveFork). With
// AtSeq or AtTime, the fold stops there; a thread that has events, but none
// by then, folds to its empty state. A thread with no events at all is an
// error wrapping [ErrNoEvents].
//
// It starts from the thread's snapshot when one verifies and is not past
// the point asked for, and reads only the events after it: the snapshot is
// a cache, and a bad one is ignored.
func (c *Client) Thread(ctx context.Context, thread string, opts ...ThreadOption) (*projections.Thread, error) {
	return c.thread(ctx, c.store, thread, opts...)
}

// thread is Thread reading the log through l.
func (c *Client) thread(ctx context.Context, l events.Loader, thread string, opts ...ThreadOption) (*projections.Thread, error) {
	var o threadOptions
	for _, opt := range opts {
		opt(&o)
	}
	var t *projections.Thread
	if o.at.IsZero() && o.keep == nil {
		t = c.snapshot(ctx, thread, o.seq, true)
	}
	from := uint64(1)
	if t != nil {
		from = t.LastSeq + 1
	}
	envs, err := l.Load(ctx, thread, from)
	if err != nil {
		return nil, fmt.Errorf("client: load %s: %w", thread, err)
	}
	if t == nil {
		if len(envs) == 0 {
			return nil, fmt.Errorf("%w: %s", ErrNoEvents, thread)
		}
		if err := projections.ResolveFirst(ctx, c.store, envs); err != nil {
			return nil, fmt.Errorf("client: load %s: %w", thread, err)
		}
		t = projections.New(thread)
	}
	for _, env := range envs {
		if (o.seq != 0 && env.Seq > o.seq) || (!o.at.IsZero() && env.Stored.After(o.at)) || (o.keep != nil && !o.keep(env)) {
			continue
		}
		t.Apply(env)
	}
	return t, nil
}

// snapshot returns the thread's snapshot when it verifies, is at or before
// upTo (0: any), is not past the thread's last event, and holds its fork's
// history; else nil. Any failure to read it is a miss: the caller folds
// from the start.
//
// A runner's snapshot is compact (projections.Thread.Compact): it holds no
// consumed messages and no replies. With whole, for a reader of the whole
// thread, such a snapshot is a miss; otherwise it is expanded, for a reader
// that follows what comes after it.
func (c *Client) snapshot(ctx context.Context, thread string, upTo uint64, whole bool) *projections.Thread {
	data, err := c.store.LoadSnapshot(ctx, thread)
	if err != nil || data == nil {
		return nil
	}
	t, err := projections.DecodeSnapshot(thread, data)
	if err != nil || (upTo != 0 && t.LastSeq > upTo) || (t.Fork != nil && t.Fork.Unresolved) || (whole && t.Compacted()) {
		return nil
	}
	t.Expand() // a runner's compact view: fold what comes next whole
	// A snapshot past the log is of another log (a stream made again).
	if last, err := events.ThreadLastSeq(ctx, c.store, thread); err != nil || last < t.LastSeq {
		return nil
	}
	return t
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
