package thread

import (
	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/events"
)

// Input is something that happened to a thread's holder. The shell turns
// every I/O result, run report and timer into an Input for [Core.Decide].
type Input interface{ isInput() }

// Observed is an event read from the thread's ordered tail. The core's view
// follows the log only through Observed, so it never applies an event the
// log does not hold.
type Observed struct{ Env events.Envelope }

// AppendDone is the result of the append the last Ready asked for.
type AppendDone struct {
	Ack events.Ack
	Err error
}

// Synced reports the thread's last stream sequence, read after a Ready with
// Sync set, so the core waits for its view to catch up before planning.
type Synced struct{ LastSeq uint64 }

// RunOutput is text a run emitted.
type RunOutput struct{ RunID, Text string }

// RunAsked is a request a run opened; the shell names it.
type RunAsked struct{ RunID, RequestID, Question string }

// RunSteer is a run asking for steering ([agent.Turn.Steer]): the
// messages posted since it started that no run has taken. The core gives
// them to it, one steering_given each, and then answers the ask with
// [Ready.Steered]. Only an ask makes steering: a message is consumed as
// steering only while its run's agent is asking for it.
type RunSteer struct{ RunID string }

// RunFinished is the end of a run's goroutine: Err nil means completed.
type RunFinished struct {
	RunID  string
	Output string
	Err    error
}

// LeaseLost says the lease could not be renewed: another holder has it.
type LeaseLost struct{ Err error }

// Tick is one idle-timer interval.
type Tick struct{}

// Drain asks the holder to stop taking messages, let its run finish, record
// its end and release the claim.
type Drain struct {
	// Handover: the runner lives on with its session (the thread's
	// partition moved to another runner), so the release gives the lease
	// up too, pending messages or not: no session close will.
	Handover bool
}

// Shutdown asks the holder to stop taking messages, cancel its run, record
// the run's end and release the claim.
type Shutdown struct{}

// RememberID asks the core's view to remember message id ID itself: the
// store's first-post index does not answer for it (events.FirstPosts).
type RememberID struct{ ID string }

func (Observed) isInput()    {}
func (AppendDone) isInput()  {}
func (Synced) isInput()      {}
func (RunOutput) isInput()   {}
func (RunAsked) isInput()    {}
func (RunFinished) isInput() {}
func (RunSteer) isInput()    {}
func (LeaseLost) isInput()   {}
func (Tick) isInput()        {}
func (Shutdown) isInput()    {}
func (Drain) isInput()       {}
func (RememberID) isInput()  {}

// StartRun asks the shell to execute a run whose run_started the log holds.
// The core keeps no history: the shell reads the run's history from the
// log when its agent asks for it ([History]).
type StartRun struct {
	RunID  string
	Token  agent.Token
	Prompt agent.Message
	// StartSeq is the run's run_started: its history is the log before it.
	StartSeq uint64
	// Window is the most messages the run's history holds; negative means
	// the whole thread.
	Window int
	// Recent are the sequences of the newest Window messages before the
	// prompt, oldest first, as far as the view keeps them: the history's
	// messages, less those a rolled-back run consumed. Empty with a
	// negative Window, or when no message came before.
	Recent []uint64
	// Forked says the thread starts with a fork: its history reaches into
	// the source's messages, which Recent does not name.
	Forked bool
}

// Deliver hands a consumed message to a running run: an answer to its
// request (RequestID set) or steering.
type Deliver struct {
	RunID     string
	RequestID string
	Message   agent.Message
}
