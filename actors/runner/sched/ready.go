package sched

import (
	"time"

	"github.com/artifactr/artifactr/events"
)

// Ready is what the shell must do after a [Scheduler.Step], all as data.
//
// The loop's contract:
//
//   - Carry out a Ready before the next Step, except the I/O it names,
//     which runs off the loop: a peek or claim reports its end as an
//     input ([PeekDone], [ClaimDone]); acknowledgements report nothing.
//   - A Spawn is carried out at once, and reported as [Spawned] before
//     any other input: until then the scheduler neither holds the thread
//     nor claims it.
//   - Wake is the only timer: when it is not zero, feed a [Tick] at or
//     after it. A Tick that comes early fires nothing; one that never
//     comes leaves rechecks, orphans and retries waiting.
//   - Report every Terminated of a thread actor spawned from a Spawn, and
//     only those: an actor of an older claim of the same thread is not
//     the scheduler's.
type Ready struct {
	// Forward passes the [Routed] input's event to its thread's actor.
	Forward bool
	// Peeks are threads to read, off the loop, for whether they have work.
	Peeks []string
	// Claims are claims to make, off the loop.
	Claims []Claim
	// Spawn is a thread actor to start for a claim that ended, or nil.
	Spawn *Spawn
	// Acks are wake-ups to acknowledge, off the loop: an ack is a write.
	Acks []func()
	// SessionGone are the threads whose actors must be told that their
	// claim's session was lost.
	SessionGone []string
	// Drain are the threads whose actors must drain.
	Drain []string
	// Timers are the timers this step armed, for the record: the
	// scheduler keeps them and fires them on a Tick.
	Timers []Timer
	// Wake is when the earliest pending timer is due; zero when none is.
	Wake time.Time
	// Done says the drain is over: nothing held, nothing in flight.
	Done bool
}

// Claim asks the shell to claim Thread under Session.
type Claim struct {
	Thread  string
	Session events.Session
}

// Spawn asks the shell to start a thread actor for a claim.
type Spawn struct {
	Thread string
	Claim  events.Claim
	// Routed are events the follow routed while the claim was in flight,
	// to be fed after the claim's history (the core skips what it holds).
	Routed []events.Envelope
	// Probe says the claim was not for a post: its actor gives the thread
	// up at once if it has nothing to do.
	Probe bool

	acks int // wake-ups parked before the claim started
}

// TimerKind is what a [Timer] does when it fires.
type TimerKind uint8

const (
	// TimerRecheck looks again at a thread (see [Scheduler] rechecks).
	TimerRecheck TimerKind = iota
	// TimerOrphan looks again at a lapsed session's thread that fell to
	// another runner.
	TimerOrphan
	// TimerRetry tries a failed claim again.
	TimerRetry
	// TimerHandover claims again a thread whose actor panicked.
	TimerHandover
)

func (k TimerKind) String() string {
	return [...]string{"recheck", "orphan", "retry", "handover"}[k]
}

// Timer is a timer armed by the scheduler.
type Timer struct {
	Kind   TimerKind
	Thread string
	At     time.Time
	// Dead is the lapsed session of a TimerOrphan.
	Dead string
	// Want is what a TimerRetry claims for.
	Want Want
}
