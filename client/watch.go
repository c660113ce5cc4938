package client

import (
	"context"
	"fmt"
	"iter"
	"sync"

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
// With partitions, a thread's events are in its partition's stream; every
// thread's are in several streams, each with its own sequences: Watch("")
// follows each partition from from, and yields each partition's events in
// its order, the partitions' interleaved as they come.
//
//	for env, err := range c.Watch(ctx, "t1", 1) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(env.Seq, env.Type)
//	}
func (c *Client) Watch(ctx context.Context, thread string, from uint64) iter.Seq2[events.Envelope, error] {
	if thread == "" {
		froms := make([]uint64, c.store.Subjects().PartitionCount())
		for p := range froms {
			froms[p] = from
		}
		return c.WatchAll(ctx, froms)
	}
	return func(yield func(events.Envelope, error) bool) {
		if err := events.ValidateThreadID(thread); err != nil {
			yield(events.Envelope{}, fmt.Errorf("client: watch: %w", err))
			return
		}
		c.watchOne(ctx, c.store.Subjects().ThreadAll(thread), from, yield)
	}
}

// WatchAll follows every thread's events as Watch("", ...) does, from
// sequence from[p] on in partition p's stream (0: only new events), one
// entry per partition ([Client.LastSeqs] has as many): each partition's
// events in its order, the partitions' interleaved as they come.
func (c *Client) WatchAll(ctx context.Context, from []uint64) iter.Seq2[events.Envelope, error] {
	return func(yield func(events.Envelope, error) bool) {
		subj := c.store.Subjects()
		if len(from) != subj.PartitionCount() {
			yield(events.Envelope{}, fmt.Errorf("client: watch: %d start sequences for %d partitions", len(from), subj.PartitionCount()))
			return
		}
		if !subj.Partitioned() {
			c.watchOne(ctx, subj.All(), from[0], yield)
			return
		}
		filters := make([]string, len(from))
		for p := range filters {
			filters[p] = subj.PartitionAll(p)
		}
		c.watchMany(ctx, filters, from, yield)
	}
}

// watchOne follows one filter, which one stream holds.
func (c *Client) watchOne(ctx context.Context, filter string, from uint64, yield func(events.Envelope, error) bool) {
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

// watched is one event, or the failure that ended a partition's follow.
type watched struct {
	env events.Envelope
	err error
}

// watchMany follows filters, one per partition's stream, each in a
// goroutine of its own, and yields what they read on the caller's.
func (c *Client) watchMany(ctx context.Context, filters []string, from []uint64, yield func(events.Envelope, error) bool) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: every follow ends
	defer cancel()
	tails := make([]events.Tail, 0, len(filters))
	defer func() {
		for _, t := range tails {
			t.Stop()
		}
	}()
	for i, f := range filters {
		t, err := c.store.Tail(ctx, f, from[i])
		if err != nil {
			if ctx.Err() == nil {
				yield(events.Envelope{}, fmt.Errorf("client: watch %s: %w", f, err))
			}
			return
		}
		tails = append(tails, t)
	}
	out := make(chan watched)
	for i, t := range tails {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				env, err := t.Next(ctx)
				if err != nil {
					err = fmt.Errorf("client: watch %s: %w", filters[i], err)
				}
				select {
				case out <- watched{env, err}:
				case <-ctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case w := <-out:
			if w.err != nil {
				if ctx.Err() == nil {
					yield(events.Envelope{}, w.err)
				}
				return
			}
			if !yield(w.env, nil) {
				return
			}
		}
	}
}
