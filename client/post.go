package client

import (
	"context"
	"fmt"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/doubletext"
)

// PostOption sets optional behaviour of [Client.Post].
type PostOption func(*postOptions) error

type postOptions struct {
	id, author, assistant   string
	webhook                 string
	traceParent, traceState string
	strategy                events.Strategy
}

// WithStrategy says what the post does while a run is active: enqueue (wait
// for the next run), reject (refused, with an error wrapping
// [ErrThreadBusy], and nothing written), interrupt (the active run is
// cancelled and a run starts on this post) or rollback (interrupt, and the
// cancelled run is left out of later runs' history). Without it the post has
// the thread's strategy, which its first post or [Client.Configure] sets.
func WithStrategy(s string) PostOption {
	return func(o *postOptions) error {
		st, err := events.ParseStrategy(s)
		if err != nil {
			return fmt.Errorf("client: %w", err)
		}
		o.strategy = st
		return nil
	}
}

// WithMessageID makes the post idempotent: posting the same id to the same
// thread again, within the stream's deduplication window (2 minutes by
// default), returns the first post's sequence with Duplicate set; the same
// id with another text or author fails with an error wrapping
// events.ErrConflict and writes nothing. An id is 1 to 128 characters from
// [A-Za-z0-9_-]. Without it, Post makes a fresh id.
func WithMessageID(id string) PostOption {
	return func(o *postOptions) error {
		if err := events.ValidateMessageID(id); err != nil {
			return fmt.Errorf("client: %w", err)
		}
		o.id = id
		return nil
	}
}

// WithAssistant names the configured agent that runs the message when it is
// a prompt (serve --config); "" or a name the runner does not know runs the
// runner's default agent.
func WithAssistant(name string) PostOption {
	return func(o *postOptions) error {
		o.assistant = name
		return nil
	}
}

// WithWebhook stores url with the message: the HTTP API's webhook
// dispatcher POSTs the run's JSON there when the message's run ends.
func WithWebhook(url string) PostOption {
	return func(o *postOptions) error {
		o.webhook = url
		return nil
	}
}

// WithAuthor names the message's author.
func WithAuthor(author string) PostOption {
	return func(o *postOptions) error {
		o.author = author
		return nil
	}
}

// WithTraceContext stores a W3C trace context with the message, so the run
// that takes it continues the poster's trace.
func WithTraceContext(traceparent, tracestate string) PostOption {
	return func(o *postOptions) error {
		o.traceParent, o.traceState = traceparent, tracestate
		return nil
	}
}

// Posted is a stored post.
type Posted struct {
	Thread    string
	Seq       uint64 // the message's stream sequence: pass it to Wait
	MessageID string // "" when Post made the id
	Duplicate bool   // the id was posted before; Seq is the original
}

// Post posts text to thread. The thread id is 1 to 128 characters from
// [A-Za-z0-9_-]; a bad one fails with an error wrapping
// events.ErrInvalidThreadID, and nothing is written.
func (c *Client) Post(ctx context.Context, thread, text string, opts ...PostOption) (Posted, error) {
	var o postOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return Posted{}, err
		}
	}
	var popts []events.PostOption
	if o.traceParent != "" {
		popts = append(popts, events.WithTraceContext(o.traceParent, o.traceState))
	}
	m := &eventspb.MessagePosted{MessageId: o.id, Author: o.author, Text: text, Strategy: string(o.strategy), Assistant: o.assistant, Webhook: o.webhook}
	ack, err := doubletext.Poster{Store: c.store}.Post(ctx, thread, m, popts...)
	if err != nil {
		return Posted{}, fmt.Errorf("client: post to %s: %w", thread, err)
	}
	return Posted{Thread: thread, Seq: ack.Seq, MessageID: o.id, Duplicate: ack.Duplicate}, nil
}

// Cancel asks thread's holder to cancel run ("" for the run active when the
// request is stored): the run ends as run_failed with reason "cancelled". A
// run no longer active then is left alone. requestID makes the request
// idempotent; "" picks a fresh one. It needs only a client's permissions.
func (c *Client) Cancel(ctx context.Context, thread, run, requestID string) (uint64, error) {
	return c.cancel(ctx, thread, run, requestID, false)
}

// CancelRollback is [Client.Cancel], and the cancelled run (its prompt, the
// messages it consumed, its outputs) is left out of the history later runs
// get, as a rollback post does.
func (c *Client) CancelRollback(ctx context.Context, thread, run, requestID string) (uint64, error) {
	return c.cancel(ctx, thread, run, requestID, true)
}

func (c *Client) cancel(ctx context.Context, thread, run, requestID string, rollback bool) (uint64, error) {
	cancel := doubletext.Cancel
	if rollback {
		cancel = doubletext.CancelRollback
	}
	ack, err := cancel(ctx, c.store, thread, run, requestID, time.Now())
	if err != nil {
		return 0, fmt.Errorf("client: cancel in %s: %w", thread, err)
	}
	return ack.Seq, nil
}

// Configure sets thread's double-texting strategy (see [WithStrategy]) for
// the posts that name none.
func (c *Client) Configure(ctx context.Context, thread, strategy string) (uint64, error) {
	st, err := events.ParseStrategy(strategy)
	if err != nil {
		return 0, fmt.Errorf("client: configure %s: %w", thread, err)
	}
	ack, err := doubletext.Configure(ctx, c.store, thread, st, time.Now())
	if err != nil {
		return 0, fmt.Errorf("client: configure %s: %w", thread, err)
	}
	return ack.Seq, nil
}
