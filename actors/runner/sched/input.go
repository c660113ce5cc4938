package sched

import (
	"time"

	"github.com/artifactr/artifactr/events"
)

// Input is one thing that happened to the runner, fed to [Scheduler.Step].
type Input struct {
	// Now is the time the shell read its clock for this input. Timers are
	// armed from it and fire on a [Tick] whose Now is at or past them.
	Now time.Time
	// Ended says the runner's context is done (killed, or its drain
	// over): a claim or peek that ends then starts nothing new.
	Ended bool
	// Event is what happened: one of the types of this file.
	Event Event
}

// Event is what an [Input] reports. Its types are those of this file.
type Event interface{ isEvent() }

type (
	// Routed is an event of the stream, in order, from the runner's follow.
	Routed struct{ Env events.Envelope }
	// Woken is a wake-up from the shared work source: Thread may have a
	// new post. Ack acknowledges it; the scheduler never calls it, but
	// hands it back in [Ready.Acks] once the post is taken care of.
	Woken struct {
		Thread string
		Ack    func()
	}
	// LookAt asks the scheduler to read Thread and claim it if it has
	// work (Runner.Wake).
	LookAt struct{ Thread string }
	// PeekDone reports a peek of [Ready.Peeks]: whether it read work.
	PeekDone struct {
		Thread string
		Work   bool
		Err    error
	}
	// ClaimDone reports a claim of [Ready.Claims]. History is what it
	// loaded, up to the claim's marker.
	ClaimDone struct {
		Thread  string
		Claim   events.Claim
		History []events.Envelope
		Err     error
	}
	// Spawned reports the spawn of [Ready.Spawn]: Err is nil when the
	// thread actor runs.
	Spawned struct {
		Spawn Spawn
		Err   error
	}
	// Terminated says the actor of Thread stopped, with the fate it left.
	Terminated struct {
		Thread string
		// Clean: the core chose to stop (released, or fenced out).
		Clean bool
		// Rework: work arrived as it released; claim again.
		Rework bool
		// Released: its release was stored.
		Released bool
		// Checked: posts up to this sequence were seen by the release.
		Checked uint64
	}
	// LeaseChanged is one update of the lease watch.
	LeaseChanged struct{ Update events.LeaseUpdate }
	// LeaseWatchReset says the lease watch started again; its current
	// state follows.
	LeaseWatchReset struct{}
	// SessionOpened says the runner opened Session; claims are made
	// under it from now on.
	SessionOpened struct{ Session events.Session }
	// SessionRenewed says the runner renewed its session.
	SessionRenewed struct{ Session events.Session }
	// SessionLost says the session ID expired or was taken: every claim
	// under it is given up.
	SessionLost struct{ ID string }
	// Drain starts the runner's drain: no new claims, every thread
	// actor drains, and wake-ups not acknowledged go to another runner.
	Drain struct{}
	// Disowned says [Config.Owns] no longer gives this runner some
	// threads (their partition is handed over): their queued claims and
	// parked wake-ups are dropped and their actors drain (Ready.Drain).
	Disowned struct{}
	// Tick fires the timers due at the input's Now.
	Tick struct{}
)

func (Routed) isEvent()          {}
func (Woken) isEvent()           {}
func (LookAt) isEvent()          {}
func (PeekDone) isEvent()        {}
func (ClaimDone) isEvent()       {}
func (Spawned) isEvent()         {}
func (Terminated) isEvent()      {}
func (LeaseChanged) isEvent()    {}
func (LeaseWatchReset) isEvent() {}
func (SessionOpened) isEvent()   {}
func (SessionRenewed) isEvent()  {}
func (SessionLost) isEvent()     {}
func (Drain) isEvent()           {}
func (Disowned) isEvent()        {}
func (Tick) isEvent()            {}
