package events

import "errors"

// ErrThreadBusy is returned when another holder has the thread: a fenced
// append refused because a newer claim marker exists (nothing was written),
// or a lease that is held and has not lapsed.
var ErrThreadBusy = errors.New("events: thread busy")

// ErrConflict is returned when a compare-and-set append is refused because
// the subject moved past the expected sequence. Nothing was written; reload
// and decide again.
var ErrConflict = errors.New("events: append conflict")

// ErrRunMoved is returned, wrapped together with [ErrConflict], when a
// guarded consuming append ([FencedGuarded]) is refused because the run
// subject moved past the sequence its guard expected while the writer's
// claim was still the newest: someone else wrote a run event the writer has
// not read. Nothing was written; reload, fold what landed, and decide again.
// It never means the claim was lost: a refused fence is [ErrThreadBusy].
var ErrRunMoved = errors.New("events: run subject moved")

// ErrLeaseLost is returned by RenewLease and ReleaseLease when the lease is no
// longer the caller's: it lapsed and was taken, or it was released.
var ErrLeaseLost = errors.New("events: lease lost")

// ErrInvalidThreadID is returned for a thread id that is not a valid NATS
// subject token of the form [A-Za-z0-9_-]{1,128}. Nothing was written.
var ErrInvalidThreadID = errors.New("events: invalid thread id")

// ErrTooLarge is returned when an event exceeds the store's size limit.
// Nothing was written.
var ErrTooLarge = errors.New("events: event too large")

// ErrInvalidEvent is returned when an append is malformed: no body, a body on
// the wrong subject, or a consuming body without the fence. Nothing was
// written.
var ErrInvalidEvent = errors.New("events: invalid event")

// ErrUnavailable is returned when the store cannot be reached within the
// call's bounded wait. When it wraps a publish, the outcome is unknown.
var ErrUnavailable = errors.New("events: store unavailable")

// ErrClosed is returned by calls on a closed store or tail.
var ErrClosed = errors.New("events: closed")

// ErrNoStorage is returned when the server refused a write for want of
// storage (JetStream 10023, insufficient resources): nothing was written.
// It is a state to recover from, not a verdict on the write: it lands once
// space is freed. Wrapped together with [ErrUnavailable], an earlier
// attempt of the same call may have landed: the outcome is unknown.
var ErrNoStorage = errors.New("events: not written: the server is out of storage")

// ErrLayout is returned (wrapped) when a store's partition layout does not
// fit what was asked: a store opened with another partition count than its
// deployment's streams record, or a read on a filter that spans several
// partitions' streams.
var ErrLayout = errors.New("events: partition layout")
