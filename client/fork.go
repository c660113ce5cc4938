package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections"
)

// ErrThreadExists is returned by [Client.Fork] when the new thread already
// has events: a fork only starts a thread. It wraps events.ErrConflict
// when the store refused the append; nothing was written.
var ErrThreadExists = errors.New("client: thread already has events")

// ErrNoSuchEvent is returned by [Client.Fork] when the sequence it names is
// not one of the source thread's events. Nothing was written.
var ErrNoSuchEvent = errors.New("client: no such event in the source thread")

// Forked is a stored fork.
type Forked struct {
	Thread    string // the new thread
	Source    string
	SourceSeq uint64
	Seq       uint64 // the new thread's thread_forked
	Messages  int    // messages of the history (the source's up to SourceSeq)
	Runs      int    // runs of the history
	Duplicate bool   // this very fork had landed before; Seq is the original
}

// Fork creates thread whose history is source's up to seq, the stream
// sequence of one of source's events, through a thread_forked event on
// thread (see projections.Fork for what the history is and why nothing of
// it is live: a message pending in source at seq is history in thread, not
// a prompt). The event names source and seq and copies nothing (a fork by
// reference), so a thread of any length can be forked, and a fork of a
// fork too; readers fold source up to seq (projections.ResolveFork).
//
// The fork is refused, and nothing is written, when thread already has
// events ([ErrThreadExists]: the append expects thread's posted subject
// empty, and its claim and run subjects are read empty first, which they
// stay, as runners claim only threads with posts) or when seq is not an
// event of source ([ErrNoSuchEvent]; [ErrNoEvents] when source has none).
// Forking is idempotent: retrying the same fork, such as after a timeout
// whose outcome was unknown, returns the first one's sequence with
// Duplicate set.
func (c *Client) Fork(ctx context.Context, source string, seq uint64, thread string) (Forked, error) {
	for _, id := range []string{source, thread} {
		if err := events.ValidateThreadID(id); err != nil {
			return Forked{}, fmt.Errorf("client: fork: %w", err)
		}
	}
	if source == thread {
		return Forked{}, fmt.Errorf("client: fork: %s cannot be forked into itself", thread)
	}
	t, found, err := projections.SourceAt(ctx, c.store, source, seq)
	if err != nil {
		return Forked{}, fmt.Errorf("client: fork: load %s: %w", source, err)
	}
	if !found {
		envs, err := c.load(ctx, source)
		if err != nil {
			return Forked{}, err
		}
		return Forked{}, fmt.Errorf("%w: %d is not an event of %s: %s", ErrNoSuchEvent, seq, source, nearestEvents(envs, seq))
	}
	f := Forked{Thread: thread, Source: source, SourceSeq: seq, Messages: len(t.Messages), Runs: len(t.Runs)}
	for _, k := range []events.Kind{events.KindClaim, events.KindRun} {
		last, err := c.store.LastSeq(ctx, thread, k)
		if err != nil {
			return Forked{}, fmt.Errorf("client: fork: read %s: %w", thread, err)
		}
		if last != 0 {
			if prev, ok := c.landedFork(ctx, thread, source, seq); ok {
				f.Seq, f.Duplicate = prev, true
				return f, nil
			}
			return Forked{}, fmt.Errorf("%w: %s has a %s event at %d", ErrThreadExists, thread, k, last)
		}
	}
	ev := events.NewThreadForked(thread, time.Now(), &eventspb.ThreadForked{SourceThread: source, SourceSeq: seq, Reference: true})
	ack, err := c.store.Append(ctx, ev, events.ExpectLast(0), events.WithMsgID(events.ForkMsgID(thread, source, seq)))
	switch {
	case errors.Is(err, events.ErrConflict):
		if prev, ok := c.landedFork(ctx, thread, source, seq); ok {
			f.Seq, f.Duplicate = prev, true
			return f, nil
		}
		return Forked{}, fmt.Errorf("%w: %s has posts: %w", ErrThreadExists, thread, err)
	case err != nil:
		return Forked{}, fmt.Errorf("client: fork %s at %d into %s: %w", source, seq, thread, err)
	}
	f.Seq, f.Duplicate = ack.Seq, ack.Duplicate
	return f, nil
}

// landedFork reports whether thread's first event is the fork of source at
// seq, and its sequence: a fork retried after it landed.
func (c *Client) landedFork(ctx context.Context, thread, source string, seq uint64) (uint64, bool) {
	envs, err := c.store.Load(ctx, thread, 1)
	if err != nil || len(envs) == 0 || envs[0].Event == nil || envs[0].Err != nil {
		return 0, false
	}
	b := envs[0].Event.GetThreadForked()
	if b == nil || b.GetSourceThread() != source || b.GetSourceSeq() != seq {
		return 0, false
	}
	return envs[0].Seq, true
}

// nearestEvents names the events of a thread around seq, which is not one
// of them. A thread's sequences are not contiguous: the stream interleaves
// every thread's events, so a range alone would suggest that seq is one.
func nearestEvents(envs []events.Envelope, seq uint64) string {
	first, last := envs[0].Seq, envs[len(envs)-1].Seq
	switch {
	case seq < first:
		return fmt.Sprintf("its first event is at %d (it has %d, up to %d)", first, len(envs), last)
	case seq > last:
		return fmt.Sprintf("its last event is at %d (it has %d, from %d)", last, len(envs), first)
	}
	i, _ := slices.BinarySearchFunc(envs, seq, func(e events.Envelope, s uint64) int { return cmp.Compare(e.Seq, s) })
	return fmt.Sprintf("its nearest events are at %d and %d (it has %d, from %d to %d)", envs[i-1].Seq, envs[i].Seq, len(envs), first, last)
}
