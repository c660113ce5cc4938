package agent

import (
	"context"
	"strings"
	"time"
)

// Coalescer gathers text into few emits: buffered text is emitted every
// after its first byte was buffered, or once max bytes are, so a fast
// writer makes few run_output events and a slow one still shows each piece
// soon. The openai and exec agents share it. It is used from one goroutine.
type Coalescer struct {
	emit  func(ctx context.Context, text string) error
	every time.Duration
	max   int

	buf   strings.Builder
	timer *time.Timer // running while buf holds text
}

// NewCoalescer returns a Coalescer that hands text to emit, typically a
// [Turn]'s Emit wrapped to add context to its error.
func NewCoalescer(emit func(ctx context.Context, text string) error, every time.Duration, max int) *Coalescer {
	return &Coalescer{emit: emit, every: every, max: max}
}

// Add buffers s, emitting the buffer if it reached max.
func (c *Coalescer) Add(ctx context.Context, s string) error {
	if s == "" {
		return nil
	}
	if c.buf.Len() == 0 {
		if c.timer == nil {
			c.timer = time.NewTimer(c.every)
		} else {
			c.timer.Reset(c.every)
		}
	}
	c.buf.WriteString(s)
	if c.buf.Len() >= c.max {
		return c.Flush(ctx)
	}
	return nil
}

// Buffered returns how many bytes wait to be emitted.
func (c *Coalescer) Buffered() int { return c.buf.Len() }

// Due fires when buffered text is due to be emitted; it is nil (never
// ready) while nothing is buffered.
func (c *Coalescer) Due() <-chan time.Time {
	if c.buf.Len() == 0 || c.timer == nil {
		return nil
	}
	return c.timer.C
}

// Flush emits what is buffered.
func (c *Coalescer) Flush(ctx context.Context) error {
	if c.buf.Len() == 0 {
		return nil
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	text := c.buf.String()
	c.buf.Reset()
	return c.emit(ctx, text)
}

// Stop releases the timer.
func (c *Coalescer) Stop() {
	if c.timer != nil {
		c.timer.Stop()
	}
}
