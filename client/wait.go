package client

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
)

// ErrThreadBusy is events.ErrThreadBusy: [Client.Wait] returns a
// [*BusyError] wrapping it when the claim that was to run a message lost the
// thread to a takeover before it did.
var ErrThreadBusy = events.ErrThreadBusy

// BusyError says that a message's run start was refused, as ADR-0069 has
// RunHandle.wait raise ThreadBusy: a claim that held the thread while the
// message waited was taken over (a newer claim marker, with no release of
// it) before the message was consumed, so its run_started for the message,
// if it tried one, was refused by the fence and consumed nothing (I4). The
// thread passed to the newer claim, and TakenBy names the run that took the
// message instead, when one has.
//
// The log records no refused write (nothing is written), so this is what
// the log proves: the claim lost the thread while the message waited. A
// graceful hand-over (thread_released) is not a refusal.
type BusyError struct {
	Thread     string
	MessageSeq uint64
	// RefusedClaim is the claim (its marker's sequence) that held the
	// thread while the message waited, and lost it; RefusedHolder its
	// holder. TakenOver is the newer claim marker that took the thread.
	RefusedClaim  uint64
	RefusedHolder string
	TakenOver     uint64
	// TakenBy is the run that took the message instead, "" if none has
	// yet; TakenAs how (prompt, answer or steering).
	TakenBy string
	TakenAs projections.ConsumptionKind
}

func (e *BusyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "client: thread busy: %s: message %d waited under claim %d (%s), which claim %d took over before it ran",
		e.Thread, e.MessageSeq, e.RefusedClaim, e.RefusedHolder, e.TakenOver)
	if e.TakenBy != "" {
		fmt.Fprintf(&b, "; run %s took it instead, as its %s", e.TakenBy, e.TakenAs)
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrThreadBusy) hold.
func (e *BusyError) Unwrap() error { return ErrThreadBusy }

// Result is what became of a posted message: the run that took it.
type Result struct {
	Thread     string
	MessageSeq uint64
	RunID      string
	// TakenAs is how the run took the message: as its prompt, as the
	// answer to its request, or as steering.
	TakenAs projections.ConsumptionKind
	// Status is the run's end: completed, failed or abandoned; active when
	// the run asks a question (Question is set).
	Status  projections.RunStatus
	Outputs []string // its run_output texts
	Output  string   // the run's reply ([projections.Run.Reply]): run_completed's output, else its outputs joined
	Reason  string   // why it failed or was abandoned
	// Question and RequestID are the request the run opened and waits on:
	// the thread's next message answers it.
	Question, RequestID string
}

// WaitOption sets optional behaviour of [Client.Wait].
type WaitOption func(*waitOptions)

type waitOptions struct{ busy bool }

// FollowTakeover makes Wait report the run that took the message after a
// takeover, instead of a [*BusyError].
func FollowTakeover() WaitOption { return func(o *waitOptions) { o.busy = false } }

// Wait follows thread until the run that took message seq (a Posted.Seq)
// ends, or asks a question, and returns what it did. A failed or abandoned
// run is a Result too, with its Status and Reason, and a nil error.
//
// When a claim that held the thread while the message waited was taken
// over before the message was consumed, Wait returns a [*BusyError]
// (errors.Is(err, ErrThreadBusy)) once the message is consumed, naming the
// run that took it instead, as ADR-0069 asks of RunHandle.wait; with
// [FollowTakeover] it returns that run's Result instead. When ctx ends
// first, the error wraps ctx's and says where the message stands.
func (c *Client) Wait(ctx context.Context, thread string, seq uint64, opts ...WaitOption) (Result, error) {
	o := waitOptions{busy: true}
	for _, opt := range opts {
		opt(&o)
	}
	if err := events.ValidateThreadID(thread); err != nil {
		return Result{}, fmt.Errorf("client: wait: %w", err)
	}
	w := waiter{t: c.waitStart(ctx, thread, seq), seq: seq}
	for env, err := range c.Watch(ctx, thread, w.t.LastSeq+1) {
		if err != nil {
			return Result{}, fmt.Errorf("client: wait for message %d of %s: %w", seq, thread, err)
		}
		if r, err, done := w.step(env, o.busy); done {
			return r, err
		}
	}
	return Result{}, fmt.Errorf("client: wait for message %d of %s: %s: %w", seq, thread, w.where(), context.Cause(ctx))
}

// waitStart is the fold a wait starts from: the thread's snapshot when it
// is from before message seq (the wait must see every claim while the
// message waited), else the empty thread. A wait then reads the thread's
// tail, not its whole history.
func (c *Client) waitStart(ctx context.Context, thread string, seq uint64) *projections.Thread {
	if seq > 1 {
		if t := c.snapshot(ctx, thread, seq-1, false); t != nil {
			return t
		}
	}
	return projections.New(thread)
}

// waiter folds a thread's events and watches one message.
type waiter struct {
	t   *projections.Thread
	seq uint64
	// lost is the first claim that held the thread while the message
	// waited and was taken over; 0 while none.
	lost, lostBy uint64
	lostHolder   string
}

// step applies env and reports whether the wait is over.
func (w *waiter) step(env events.Envelope, busy bool) (Result, error, bool) {
	t := w.t
	before := t.Claim
	t.Apply(env)
	m := w.message()
	if m == nil && t.LastSeq >= w.seq {
		return Result{}, fmt.Errorf("client: wait: %d is not a message of %s", w.seq, t.ID), true
	}
	if m == nil {
		return Result{}, nil, false // not posted yet, as far as the log goes
	}
	if m.Consumed == nil && w.lost == 0 && before.Seq != 0 && !before.Released && t.Claim.Seq != before.Seq {
		// A claim held the thread while the message waited, and a newer
		// marker superseded it unreleased: a takeover.
		w.lost, w.lostBy, w.lostHolder = before.Seq, t.Claim.Seq, before.Holder
	}
	if m.Consumed == nil {
		return Result{}, nil, false
	}
	c := m.Consumed
	if c.Kind == projections.ConsumedForked {
		return Result{}, fmt.Errorf("client: wait: message %d of %s is history copied by a fork, never run there", w.seq, t.ID), true
	}
	if busy && w.lost != 0 {
		return Result{}, &BusyError{Thread: t.ID, MessageSeq: w.seq, RefusedClaim: w.lost, RefusedHolder: w.lostHolder,
			TakenOver: w.lostBy, TakenBy: c.RunID, TakenAs: c.Kind}, true
	}
	r := w.run(c.RunID)
	if r == nil {
		return Result{}, fmt.Errorf("client: wait: message %d of %s was consumed by run %s, which is not in the log", w.seq, t.ID, c.RunID), true
	}
	res := Result{Thread: t.ID, MessageSeq: w.seq, RunID: r.ID, TakenAs: c.Kind, Status: r.Status,
		Outputs: r.Outputs, Reason: r.Reason}
	if r.Status == projections.RunCompleted {
		res.Output = r.Reply()
	}
	if r.Status != projections.RunActive {
		return res, nil, true
	}
	if open := t.OpenRequests(); len(open) > 0 {
		res.Question, res.RequestID = open[0].Question, open[0].ID
		return res, nil, true
	}
	return Result{}, nil, false
}

// message finds the message by binary search: a wait folds every event of
// its tail, so a scan of the messages would cost the thread's length each.
func (w *waiter) message() *projections.Message {
	ms := w.t.Messages
	if i, ok := slices.BinarySearchFunc(ms, w.seq, func(m projections.Message, s uint64) int { return cmp.Compare(m.Seq, s) }); ok {
		return &ms[i]
	}
	return nil
}

func (w *waiter) run(id string) *projections.Run {
	for i := len(w.t.Runs) - 1; i >= 0; i-- {
		if w.t.Runs[i].ID == id {
			return w.t.Runs[i]
		}
	}
	return nil
}

// where says how far the message got.
func (w *waiter) where() string {
	m := w.message()
	switch {
	case m == nil:
		return fmt.Sprintf("message %d is not a message of %s (yet)", w.seq, w.t.ID)
	case m.Consumed == nil:
		return fmt.Sprintf("message %d is still pending (is a runner serving this stream?)", w.seq)
	}
	return fmt.Sprintf("message %d went to run %s as its %s, which is still active", w.seq, m.Consumed.RunID, m.Consumed.Kind)
}
