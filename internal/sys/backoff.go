package sys

import (
	"context"
	"time"
)

// Backoff is a retry delay that doubles after each wait, up to a cap: the
// loops that retry a store call until it succeeds or their context ends
// (open a session, follow the stream, watch leases, read a thread) share
// it, so their pacing is written once.
//
// A Backoff is used by one loop; it is not safe for concurrent use.
type Backoff struct {
	next  time.Duration // the delay the next Wait sleeps
	limit time.Duration
}

// NewBackoff returns a Backoff whose first Wait sleeps first, and each
// later one twice the one before, never more than limit.
func NewBackoff(first, limit time.Duration) Backoff {
	return Backoff{next: first, limit: limit}
}

// Wait sleeps the current delay, or until ctx ends, then doubles the delay
// up to the cap. It reports whether the delay passed; false means ctx
// ended and the loop should stop.
func (b *Backoff) Wait(ctx context.Context) bool {
	d := b.next
	b.next = min(2*b.next, b.limit)
	return Sleep(ctx, d)
}
