package client

import (
	"context"
	"fmt"
	"iter"

	"github.com/artifactr/artifactr/events"
)

// Watch follows the events of thread, or of every thread when thread is
// "", from stream sequence from on (0: only events written from now on),
// decoded. It yields each event in stream order, live, until ctx is done or
// the loop stops; breaking out of the loop stops the follow. A malformed
// event is yielded with Envelope.Err set, and a nil error: it is part of
// the log. A failure of the follow itself is yielded once as an error, and
// ends the sequence; ctx ending ends it quietly.
//
//	for env, err := range c.Watch(ctx, "t1", 1) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(env.Seq, env.Type)
//	}
func (c *Client) Watch(ctx context.Context, thread string, from uint64) iter.Seq2[events.Envelope, error] {
	return func(yield func(events.Envelope, error) bool) {
		subj := c.store.Subjects()
		filter := subj.All()
		if thread != "" {
			if err := events.ValidateThreadID(thread); err != nil {
				yield(events.Envelope{}, fmt.Errorf("client: watch: %w", err))
				return
			}
			filter = subj.ThreadAll(thread)
		}
		tail, err := c.store.Tail(ctx, filter, from)
		if err != nil {
			if ctx.Err() == nil {
				yield(events.Envelope{}, fmt.Errorf("client: watch %s: %w", filter, err))
			}
			return
		}
		defer tail.Stop()
		for {
			env, err := tail.Next(ctx)
			if err != nil {
				if ctx.Err() == nil {
					yield(events.Envelope{}, fmt.Errorf("client: watch %s: %w", filter, err))
				}
				return
			}
			if !yield(env, nil) {
				return
			}
		}
	}
}
