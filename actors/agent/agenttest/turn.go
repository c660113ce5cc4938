// Package agenttest provides a scripted [agent.Turn] for testing agents and
// the code that drives them.
//
// # Usage
//
//	turn := agenttest.NewTurn("ask: name?")
//	turn.Answer("bob")     // answers the first Ask
//	turn.AddSteering("go left") // taken by the agent's next Steer
//	out, err := agent.Echo{}.Run(ctx, turn)
//	turn.Outputs()         // what the agent emitted
//	turn.Questions()       // what it asked
package agenttest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/artifactr/artifactr/actors/agent"
)

// Turn is a scripted [agent.Turn]. Set the exported fields before the run
// starts; the methods are safe for concurrent use, so a test may script and
// inspect the turn while the agent runs.
type Turn struct {
	// Tok is returned by Token.
	Tok agent.Token
	// Msg is returned by Prompt.
	Msg agent.Message
	// Hist is returned by History.
	Hist []agent.Message
	// AnswerFunc, if set, answers every question instead of the queue that
	// Answer fills.
	AnswerFunc func(ctx context.Context, question string) (agent.Message, error)

	mu        sync.Mutex // protects following fields
	steering  []agent.Message
	steers    int // calls of Steer
	answers   []agent.Message
	outputs   []string
	questions []string
	ended     bool
	changed   chan struct{} // closed and replaced on every record
	seq       uint64        // last Seq given to a scripted message
}

// NewTurn returns a turn whose prompt is text, with a fixed token and no
// history.
func NewTurn(text string) *Turn {
	return &Turn{
		Tok: agent.Token{Thread: "t1", ClaimSeq: 1, RunID: "run-1"},
		Msg: agent.Message{Seq: 1, ID: "m1", Author: "user", Text: text},
	}
}

// Token returns t.Tok.
func (t *Turn) Token() agent.Token { return t.Tok }

// Prompt returns t.Msg.
func (t *Turn) Prompt() agent.Message { return t.Msg }

// History returns t.Hist.
func (t *Turn) History() []agent.Message { return t.Hist }

// Emit records text. It fails once ctx is done or End was called, as the
// real Turn does.
func (t *Turn) Emit(ctx context.Context, text string) error {
	if err := t.check(ctx); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.outputs = append(t.outputs, text)
	t.notifyLocked()
	return nil
}

// Ask records question and returns AnswerFunc's answer or the next queued
// answer. With neither, it blocks until an answer is queued, ctx is done, or
// End is called.
func (t *Turn) Ask(ctx context.Context, question string) (agent.Message, error) {
	if err := t.check(ctx); err != nil {
		return agent.Message{}, err
	}
	t.mu.Lock()
	t.questions = append(t.questions, question)
	t.notifyLocked()
	t.mu.Unlock()
	if t.AnswerFunc != nil {
		return t.AnswerFunc(ctx, question)
	}
	for {
		t.mu.Lock()
		if t.ended {
			t.mu.Unlock()
			return agent.Message{}, runEnded(context.Canceled)
		}
		if len(t.answers) > 0 {
			m := t.answers[0]
			t.answers = t.answers[1:]
			t.mu.Unlock()
			return m, nil
		}
		changed := t.changedLocked()
		t.mu.Unlock()
		select {
		case <-ctx.Done():
			return agent.Message{}, runEnded(ctx.Err())
		case <-changed:
		}
	}
}

// Steer returns the steering messages AddSteering queued since the last
// call, oldest first, and counts the call. It fails once ctx is done or End
// was called, as the real Turn does.
func (t *Turn) Steer(ctx context.Context) ([]agent.Message, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	got := t.steering
	t.steering = nil
	t.steers++
	t.notifyLocked()
	return got, nil
}

// Answer queues an answer with text for the next unanswered Ask.
func (t *Turn) Answer(text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.answers = append(t.answers, t.messageLocked("answer", text))
	t.notifyLocked()
}

// AddSteering queues a steering message with text, as if posted while the
// run is active: the agent's next Steer takes it.
func (t *Turn) AddSteering(text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.steering = append(t.steering, t.messageLocked("steer", text))
	t.notifyLocked()
}

// SteerCalls returns how many times the agent called Steer.
func (t *Turn) SteerCalls() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.steers
}

// End makes every later Emit and Ask, and any blocked Ask, fail as the
// runner's Turn does once it cancelled the run (its claim was lost, or the
// runner stops): with an error that is both [agent.ErrRunEnded] and
// context.Canceled. A done context does the same with its own error.
func (t *Turn) End() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended = true
	t.notifyLocked()
}

// Outputs returns the emitted texts, in order.
func (t *Turn) Outputs() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.outputs...)
}

// Questions returns the questions asked, in order.
func (t *Turn) Questions() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.questions...)
}

// WaitOutputs blocks until at least n outputs were emitted, so a test can act
// on a run at a known point without sleeping.
func (t *Turn) WaitOutputs(ctx context.Context, n int) ([]string, error) {
	return t.wait(ctx, func() []string { return t.outputs }, n)
}

// WaitQuestions blocks until at least n questions were asked.
func (t *Turn) WaitQuestions(ctx context.Context, n int) ([]string, error) {
	return t.wait(ctx, func() []string { return t.questions }, n)
}

func (t *Turn) wait(ctx context.Context, get func() []string, n int) ([]string, error) {
	for {
		t.mu.Lock()
		if got := get(); len(got) >= n {
			t.mu.Unlock()
			return append([]string(nil), got...), nil
		}
		changed := t.changedLocked()
		t.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("agenttest: waiting for %d: %w", n, context.Cause(ctx))
		case <-changed:
		}
	}
}

func (t *Turn) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return runEnded(err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return runEnded(context.Canceled)
	}
	return nil
}

// runEnded is the error of a Turn method called once the run is over, as
// the runner's Turn returns it: both [agent.ErrRunEnded] and the context's
// error (context.Canceled when the runner cancelled the run), so callers
// may test for either.
func runEnded(ctxErr error) error {
	return fmt.Errorf("%w: %w", agent.ErrRunEnded, ctxErr)
}

// CheckRunEnded returns nil when err is what a Turn method returns once
// the run was cancelled: it matches both agent.ErrRunEnded and
// context.Canceled. Tests of the runner's Turn and of this one use it, so
// the two stay alike.
func CheckRunEnded(err error) error {
	if !errors.Is(err, agent.ErrRunEnded) || !errors.Is(err, context.Canceled) {
		return fmt.Errorf("agenttest: %v is not both agent.ErrRunEnded and context.Canceled", err)
	}
	return nil
}

func (t *Turn) changedLocked() chan struct{} {
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	return t.changed
}

func (t *Turn) notifyLocked() {
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

// messageLocked makes a message that follows the prompt in the thread.
func (t *Turn) messageLocked(kind, text string) agent.Message {
	if t.seq < t.Msg.Seq {
		t.seq = t.Msg.Seq
	}
	t.seq++
	return agent.Message{Seq: t.seq, ID: fmt.Sprintf("%s-%d", kind, t.seq), Author: "tester", Text: text}
}
