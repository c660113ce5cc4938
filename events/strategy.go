package events

import (
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/artifactr/artifactr/events/eventspb"
)

// Strategy says what a post does while a run is active in its thread
// ("double texting"). The empty strategy means the thread's, and a thread
// with none enqueues.
type Strategy string

// The strategies.
const (
	// StrategyEnqueue waits for the active run to end; runs take messages
	// oldest first.
	StrategyEnqueue Strategy = "enqueue"
	// StrategyReject refuses the post while a run is active: the post
	// carries a check on the thread's run subject (see [WithExpectRunSeq]),
	// so it lands only if the run subject did not move since the poster
	// saw the thread idle.
	StrategyReject Strategy = "reject"
	// StrategyInterrupt cancels the active run, which fails with reason
	// [ReasonInterrupted]; the next run starts with the history so far.
	StrategyInterrupt Strategy = "interrupt"
	// StrategyRollback interrupts the active run as StrategyInterrupt does,
	// and leaves that run out of the history later runs are given.
	StrategyRollback Strategy = "rollback"
)

// Reasons of run_failed for runs ended on request.
const (
	// ReasonInterrupted ends a run interrupted by a post.
	ReasonInterrupted = "interrupted"
	// ReasonCancelled ends a run cancelled by a cancel_requested.
	ReasonCancelled = "cancelled"
)

// Strategies lists the strategies, for usage messages.
var Strategies = []Strategy{StrategyEnqueue, StrategyReject, StrategyInterrupt, StrategyRollback}

// ParseStrategy returns s as a Strategy, or an error wrapping
// [ErrInvalidEvent] naming the valid ones. The empty string is the empty
// strategy (the thread's).
func ParseStrategy(s string) (Strategy, error) {
	switch st := Strategy(s); st {
	case "", StrategyEnqueue, StrategyReject, StrategyInterrupt, StrategyRollback:
		return st, nil
	}
	return "", fmt.Errorf("%w: unknown strategy %q (want enqueue, reject, interrupt or rollback)", ErrInvalidEvent, s)
}

// Interrupts reports whether a post of strategy s interrupts the active run.
func (s Strategy) Interrupts() bool { return s == StrategyInterrupt || s == StrategyRollback }

// ClientWritten reports whether events of type t are written by clients, on
// the posted subject, with no check: only their Nats-Msg-Id deduplicates
// them. Such events never consume a message.
func (t Type) ClientWritten() bool {
	return t == TypeThreadConfigured || t == TypeCancelRequested || t == TypeThreadMetadata || t == TypeThreadDeleted
}

// NewThreadConfigured builds thread_configured, which a client appends with
// no check (Check{}).
func NewThreadConfigured(thread string, now time.Time, s Strategy) *eventspb.Event {
	return &eventspb.Event{Thread: thread, Time: timestamppb.New(now),
		Body: &eventspb.Event_ThreadConfigured{ThreadConfigured: &eventspb.ThreadConfigured{Strategy: string(s)}}}
}

// NewCancelRequested builds cancel_requested for run ("" for the run active
// when it is stored), which a client appends with no check (Check{}).
func NewCancelRequested(thread string, now time.Time, runID, requestID string) *eventspb.Event {
	return &eventspb.Event{Thread: thread, Time: timestamppb.New(now),
		Body: &eventspb.Event_CancelRequested{CancelRequested: &eventspb.CancelRequested{RunId: runID, RequestId: requestID}}}
}

// NewRunInterrupted builds run_interrupted: the post at messageSeq interrupts
// run, and rollback leaves the run out of later histories.
func NewRunInterrupted(c Claim, now time.Time, runID string, messageSeq uint64, rollback bool) *eventspb.Event {
	ev := held(c, now)
	ev.Body = &eventspb.Event_RunInterrupted{RunInterrupted: &eventspb.RunInterrupted{RunId: runID, MessageSeq: messageSeq, Rollback: rollback}}
	return ev
}

// WithExpectRunSeq makes a post land only while the last sequence on the
// thread's run subject is seq (0: no run event yet), as the reject strategy
// needs: a run that started or ended since the poster read seq refuses the
// post, with an error wrapping [ErrConflict], and nothing is written.
func WithExpectRunSeq(seq uint64) PostOption {
	return func(o *PostOptions) error {
		o.ExpectRun, o.ExpectRunSeq = true, seq
		return nil
	}
}

// checkClientWritten validates a client-written append: no check, no
// claim.
func checkClientWritten(ev *eventspb.Event, t Type, chk Check) error {
	if chk.Mode != CheckNone {
		return fmt.Errorf("%w: %s is written by clients with no check", ErrInvalidEvent, t)
	}
	if ev.GetClaimSeq() != 0 || ev.GetHolder() != "" {
		return fmt.Errorf("%w: %s carries no claim", ErrInvalidEvent, t)
	}
	switch b := ev.GetBody().(type) {
	case *eventspb.Event_ThreadConfigured:
		st, err := ParseStrategy(b.ThreadConfigured.GetStrategy())
		if err != nil {
			return err
		}
		if st == "" {
			return fmt.Errorf("%w: thread_configured with no strategy", ErrInvalidEvent)
		}
	case *eventspb.Event_CancelRequested:
		if id := b.CancelRequested.GetRequestId(); id != "" {
			if err := ValidateMessageID(id); err != nil {
				return err
			}
		}
	case *eventspb.Event_ThreadMetadata:
		if !MetadataValid(b.ThreadMetadata.GetMetadataJson()) {
			return fmt.Errorf("%w: thread_metadata is not a JSON object", ErrInvalidEvent)
		}
	}
	return nil
}

// MetadataValid reports whether s is a JSON object, as thread_metadata's
// metadata_json must be.
func MetadataValid(s string) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal([]byte(s), &m) == nil && m != nil
}

// NewThreadMetadata builds thread_metadata, setting the keys of metadata
// (a JSON object); created marks the thread's creation. A client appends it
// with no check (Check{}).
func NewThreadMetadata(thread string, now time.Time, metadataJSON string, created bool) *eventspb.Event {
	return &eventspb.Event{Thread: thread, Time: timestamppb.New(now),
		Body: &eventspb.Event_ThreadMetadata{ThreadMetadata: &eventspb.ThreadMetadata{MetadataJson: metadataJSON, Created: created}}}
}

// NewThreadDeleted builds thread_deleted, a tombstone that erases nothing.
// A client appends it with no check (Check{}).
func NewThreadDeleted(thread string, now time.Time, reason string) *eventspb.Event {
	return &eventspb.Event{Thread: thread, Time: timestamppb.New(now),
		Body: &eventspb.Event_ThreadDeleted{ThreadDeleted: &eventspb.ThreadDeleted{Reason: reason}}}
}
