package openai

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
)

// emitter coalesces streamed text into Turn.Emit calls: text is emitted
// the interval every after its first byte was buffered, or once max bytes
// are, so a fast stream makes few run_output events and a slow one still
// shows each token soon. It is used from the run's goroutine only.
type emitter struct {
	t     agent.Turn
	every time.Duration
	max   int

	buf   strings.Builder
	timer *time.Timer // running while buf holds text
}

func newEmitter(t agent.Turn, every time.Duration, max int) *emitter {
	return &emitter{t: t, every: every, max: max}
}

// add buffers s, emitting the buffer if it reached max.
func (e *emitter) add(ctx context.Context, s string) error {
	if s == "" {
		return nil
	}
	if e.buf.Len() == 0 {
		if e.timer == nil {
			e.timer = time.NewTimer(e.every)
		} else {
			e.timer.Reset(e.every)
		}
	}
	e.buf.WriteString(s)
	if e.buf.Len() >= e.max {
		return e.flush(ctx)
	}
	return nil
}

// due fires when buffered text is due to be emitted; it is nil (never
// ready) while nothing is buffered.
func (e *emitter) due() <-chan time.Time {
	if e.buf.Len() == 0 || e.timer == nil {
		return nil
	}
	return e.timer.C
}

// flush emits what is buffered.
func (e *emitter) flush(ctx context.Context) error {
	if e.buf.Len() == 0 {
		return nil
	}
	if e.timer != nil {
		e.timer.Stop()
	}
	text := e.buf.String()
	e.buf.Reset()
	if err := e.t.Emit(ctx, text); err != nil {
		return fmt.Errorf("openai: emit: %w", err)
	}
	return nil
}

// stop releases the timer.
func (e *emitter) stop() {
	if e.timer != nil {
		e.timer.Stop()
	}
}
