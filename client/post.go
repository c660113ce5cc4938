package client

import (
	"context"
	"fmt"

	"artifactr/events"
	"artifactr/events/eventspb"
)

// PostOption sets optional behaviour of [Client.Post].
type PostOption func(*postOptions) error

type postOptions struct {
	id, author              string
	traceParent, traceState string
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
	ack, err := c.store.Post(ctx, thread, &eventspb.MessagePosted{MessageId: o.id, Author: o.author, Text: text}, popts...)
	if err != nil {
		return Posted{}, fmt.Errorf("client: post to %s: %w", thread, err)
	}
	return Posted{Thread: thread, Seq: ack.Seq, MessageID: o.id, Duplicate: ack.Duplicate}, nil
}
