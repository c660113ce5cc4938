package owner

import (
	"time"

	"github.com/artifactr/artifactr/events"
)

// Ready is what the shell must do after a [Core.Step], all as data.
//
// The loop's contract:
//
//   - Carry out a Ready before the next Step. Its lease I/O runs off the
//     loop and reports back as an input ([Acquired], [Renewed],
//     [Released], [Leases]); each call of Acquire, Renew, Release and Read
//     is reported exactly once.
//   - Follow a partition of Follow (replay its stream from where its
//     threads' work may start, then tail it) before claiming any of its
//     threads; claim a partition's threads only while [Core.Claims] says
//     so.
//   - Drain a partition of Drain: claim none of its threads any more, and
//     give up each claim held there the way a lapsed session's threads
//     are handed over (release its claim; a fenced write refused means it
//     is already another's). Report [Drained] once none is held.
//   - Stop following a partition of Unfollow.
//   - Wake is the only timer: when it is not zero, feed a [Tick] at or
//     after it.
type Ready struct {
	// Read asks for a read of every partition lease, reported as [Leases].
	Read bool
	// Acquire are partitions to take (AcquirePartition under the session).
	Acquire []int
	// Renew are leases to renew.
	Renew []events.PartitionLease
	// Release are leases to release, after their partitions drained.
	Release []events.PartitionLease
	// Follow are partitions newly owned: follow them and claim their
	// threads with work.
	Follow []int
	// Drain are partitions to hand over.
	Drain []int
	// Unfollow are partitions no longer followed.
	Unfollow []int
	// Wake is when the next Tick is due; zero when none is.
	Wake time.Time
	// Done says a [Leave] is over: nothing owned, nothing in flight.
	Done bool
}
