package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Echo is the default agent. It is deterministic so that demos and tests can
// predict every event a run writes. The zero value echoes at once and takes
// no steering.
//
// Prompts it understands:
//
//	hello            -> "echo: hello"
//	ask: your name?  -> asks "your name?", then "echo: your name? -> <answer>"
//	fail: disk full  -> fails with reason "disk full"
//
// It emits its output before waiting Delay, so a run kept active by Delay has
// already shown output. If Steer is set, it takes the steering posted by the
// end of the wait ([Turn.Steer]), and each message adds " (steered: <text>)"
// to the returned output.
type Echo struct {
	// Delay keeps the run active before it ends, so tests can act on an
	// active run (steer it, cancel it, lose its claim).
	Delay time.Duration
	// Steer makes the agent Steerable.
	Steer bool
}

// Name returns "echo".
func (Echo) Name() string { return "echo" }

// Steerable reports e.Steer.
func (e Echo) Steerable() bool { return e.Steer }

// Run answers the prompt as described on [Echo].
func (e Echo) Run(ctx context.Context, t Turn) (string, error) {
	text := t.Prompt().Text
	if reason, ok := strings.CutPrefix(text, "fail:"); ok {
		// A failing turn takes no steering: what is posted meanwhile
		// prompts the next run instead of going unanswered.
		if _, err := (Echo{Delay: e.Delay}).wait(ctx, t); err != nil {
			return "", err
		}
		return "", failure(reason)
	}
	out := "echo: " + text
	if q, ok := strings.CutPrefix(text, "ask:"); ok {
		q = strings.TrimSpace(q)
		answer, err := t.Ask(ctx, q)
		if err != nil {
			return "", fmt.Errorf("echo: ask: %w", err)
		}
		out = "echo: " + q + " -> " + answer.Text
	}
	if err := t.Emit(ctx, out); err != nil {
		return "", fmt.Errorf("echo: emit: %w", err)
	}
	steered, err := e.wait(ctx, t)
	if err != nil {
		return "", err
	}
	return out + steered, nil
}

// failure is the error for a "fail:" prompt. Its message is the reason
// alone, unprefixed, so the run_failed reason is exactly what was typed.
func failure(reason string) error {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		reason = "failed on request"
	}
	return errors.New(reason)
}

// wait waits Delay, or until ctx is done, then takes the steering posted
// meanwhile and returns its suffix.
func (e Echo) wait(ctx context.Context, t Turn) (string, error) {
	timer := time.NewTimer(e.Delay)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return "", fmt.Errorf("echo: %w", context.Cause(ctx))
	case <-timer.C:
	}
	if !e.Steer {
		return "", nil
	}
	msgs, err := t.Steer(ctx)
	if err != nil {
		return "", fmt.Errorf("echo: steer: %w", err)
	}
	var suffix strings.Builder
	for _, m := range msgs {
		suffix.WriteString(" (steered: " + m.Text + ")")
	}
	return suffix.String(), nil
}
