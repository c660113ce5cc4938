package demo

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
)

// Tour prints a tail's events as they arrive, interleaved with narration,
// and keeps each thread's fold so that the tour can wait for a state
// without polling the store.
type Tour struct {
	w      io.Writer
	indent string
	format func(events.Envelope) string

	mu      sync.Mutex // protects the fields below and writes to w
	last    uint64
	threads map[string]*projections.Thread
	changed chan struct{} // closed and replaced on every event
	err     error         // why the tail ended
}

func newTour(w io.Writer, indent string, format func(events.Envelope) string) *Tour {
	return &Tour{w: w, indent: indent, format: format, threads: map[string]*projections.Thread{}, changed: make(chan struct{})}
}

// Say prints a line of narration.
func (p *Tour) Say(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}

// Write calls write with the tour's writer, between events: for a block
// of text that must not be cut by one.
func (p *Tour) Write(write func(io.Writer) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return write(p.w)
}

// follow prints tail's events until ctx ends or the tail fails.
func (p *Tour) follow(ctx context.Context, tail events.Tail) {
	for {
		env, err := tail.Next(ctx)
		p.mu.Lock()
		if err != nil {
			p.err = err
			close(p.changed)
			p.mu.Unlock()
			return
		}
		fmt.Fprintf(p.w, "%s%s\n", p.indent, p.format(env))
		p.last = max(p.last, env.Seq)
		t := p.threads[env.Thread]
		if t == nil {
			t = projections.New(env.Thread)
			p.threads[env.Thread] = t
		}
		t.Apply(env)
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}
}

// waitFor waits until cond holds on the printed state. cond runs under the
// printer's lock and must not call its methods.
func (p *Tour) waitFor(ctx context.Context, what string, cond func(last uint64, threads map[string]*projections.Thread) bool) error {
	for {
		p.mu.Lock()
		ok, ch, err := cond(p.last, p.threads), p.changed, p.err
		p.mu.Unlock()
		if ok {
			return nil
		}
		if err != nil {
			return fmt.Errorf("waiting for %s: event tail ended: %w", what, err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
}

// waitSeq waits until the event at seq has been printed.
func (p *Tour) waitSeq(ctx context.Context, seq uint64) error {
	return p.waitFor(ctx, fmt.Sprintf("event %d", seq), func(last uint64, _ map[string]*projections.Thread) bool { return last >= seq })
}

// waitThread waits until cond holds on thread's fold.
func (p *Tour) waitThread(ctx context.Context, thread, what string, cond func(*projections.Thread) bool) error {
	return p.waitFor(ctx, thread+": "+what, func(_ uint64, ts map[string]*projections.Thread) bool {
		t := ts[thread]
		return t != nil && cond(t)
	})
}

// settled reports whether t has at least n messages, none pending, and no
// run active.
func settled(n int) func(*projections.Thread) bool {
	return func(t *projections.Thread) bool {
		return len(t.Messages) >= n && len(t.Pending()) == 0 && t.ActiveRun == nil
	}
}
