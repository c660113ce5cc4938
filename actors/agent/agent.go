// Package agent defines the interface an artifactr agent implements, its
// plain data types, and the built-in echo agent (the default,
// deterministic). Agents that do I/O live in subpackages: exec (any
// program, speaking JSON lines).
package agent

import (
	"context"
	"errors"
)

// Message is a thread message as an agent sees it.
type Message struct {
	Seq    uint64 `json:"seq"`
	ID     string `json:"id"`
	Author string `json:"author,omitempty"`
	Text   string `json:"text"`
	// Run is set on a run's reply in a [Conversational] turn's
	// conversation: the run that wrote it. Empty on a posted message.
	Run string `json:"run,omitempty"`
	// Assistant is the configured agent the message's post named, "" for
	// the default (see [Assistants]).
	Assistant string `json:"assistant,omitempty"`
}

// Conversational is a [Turn] that also gives the conversation before its
// prompt: the thread's messages and the replies of earlier runs (Run set,
// Seq the run's end), oldest first. A rolled-back run and the messages it
// consumed are left out, as from History. An agent that talks to a model
// (the openai agent) wants this; History stays messages only.
type Conversational interface {
	Conversation() []Message
}

// Pager is a [Turn] that reads the thread further back than its History,
// which holds only the newest messages of a bounded window (PROTOCOL.md,
// "History window"). History()[0].Seq is where the window starts.
type Pager interface {
	// MessagesBefore returns the newest n (at most 1,024) of the thread's
	// messages before sequence seq, oldest first, read from the log.
	MessagesBefore(ctx context.Context, seq uint64, n int) ([]Message, error)
}

// Token is a run's fencing token. An agent passes it on to fence its own
// external writes: a write carrying an older ClaimSeq than the newest one
// seen for Thread comes from a zombie run.
type Token struct {
	Thread   string `json:"thread"`
	ClaimSeq uint64 `json:"claim_seq"`
	RunID    string `json:"run_id"`
}

// Turn is one run as its agent sees it. Its methods are safe to call from the
// run's goroutine; they fail once the run's context is done.
type Turn interface {
	// Token returns the run's fencing token.
	Token() Token
	// Prompt returns the message the run consumed.
	Prompt() Message
	// History returns the thread's messages before the prompt, oldest first.
	History() []Message
	// Emit records text as run output.
	Emit(ctx context.Context, text string) error
	// Ask opens a request and blocks until a later message answers it.
	Ask(ctx context.Context, question string) (Message, error)
	// Steer takes the messages posted since the run started that no run
	// has taken, oldest first, for a Steerable agent: each is consumed by
	// this run (steering_given) before Steer returns it. It returns none
	// when there are none, and always none for an agent that is not
	// Steerable. Steering is pulled, never pushed: an agent calls Steer at
	// its checkpoints, such as before it returns its output, so every
	// message given to a run is one its agent read. A call whose ctx ends
	// early may leave messages consumed and unread; a later call returns
	// them.
	Steer(ctx context.Context) ([]Message, error)
}

// Agent executes turns.
type Agent interface {
	// Name names the agent in run_started events.
	Name() string
	// Steerable reports whether the agent takes steering ([Turn.Steer]).
	// If not, messages posted during a run wait for the next run.
	Steerable() bool
	// Run executes one turn and returns its final output. An error makes
	// the run fail with the error as its reason.
	Run(ctx context.Context, t Turn) (string, error)
}

// ErrRunEnded is returned by Turn methods once the run is over.
var ErrRunEnded = errors.New("agent: run ended")
