package owner

import (
	"time"

	"github.com/artifactr/artifactr/events"
)

// Input is one thing that happened to the runner, fed to [Core.Step].
type Input struct {
	// Now is the time the shell read its clock for this input: leases
	// lapse and timers fire by it.
	Now time.Time
	// Event is what happened: one of the types of this file.
	Event Event
}

// Event is what an [Input] reports. Its types are those of this file.
type Event interface{ isEvent() }

type (
	// SessionOpened says the runner opened session ID: partitions are
	// owned under it from now on.
	SessionOpened struct{ ID string }
	// SessionLost says the runner's session expired or was taken: its
	// thread claims are gone, so it gives up every partition too.
	SessionLost struct{}
	// Members is the set of live runner sessions, from the lease watch
	// (its session keys), whole each time it changes, and first once the
	// watch caught up: until then the core acquires nothing. The runner's
	// own session counts whether or not it is listed.
	Members struct{ Live []string }
	// Leases is a read of the partition leases asked for by [Ready.Read]
	// (events.PartitionLeaser.PartitionLeases), or its error.
	Leases struct {
		Leases []events.PartitionLease
		Err    error
	}
	// Acquired reports an acquisition of [Ready.Acquire].
	Acquired struct {
		Partition int
		Lease     events.PartitionLease
		Err       error
	}
	// Renewed reports a renewal of [Ready.Renew].
	Renewed struct {
		Partition int
		Lease     events.PartitionLease
		Err       error
	}
	// Released reports a release of [Ready.Release].
	Released struct {
		Partition int
		Err       error
	}
	// Drained says the runner handed over every thread of a partition of
	// [Ready.Drain]: each claim it held there is released (or fenced out),
	// and it claims none there any more.
	Drained struct{ Partition int }
	// Leave starts a graceful leave: every partition is drained and
	// released, then [Ready.Done] is set.
	Leave struct{}
	// Tick fires the timer of [Ready.Wake].
	Tick struct{}
)

func (SessionOpened) isEvent() {}
func (SessionLost) isEvent()   {}
func (Members) isEvent()       {}
func (Leases) isEvent()        {}
func (Acquired) isEvent()      {}
func (Renewed) isEvent()       {}
func (Released) isEvent()      {}
func (Drained) isEvent()       {}
func (Leave) isEvent()         {}
func (Tick) isEvent()          {}
