package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// runFollow is post --follow: it follows thread from the post at seq,
// finds the run that takes the message (as its prompt, an answer or
// steering), and prints that run's outputs as they are written, up to the
// run's end or its next question. With asJSON it prints, one object per
// line as watch --json does, the post's event and the run's events from the
// one that took the message on. The exit codes are --wait's.
func (a *app) runFollow(ctx context.Context, cl *client.Client, url, thread string, seq uint64, limit time.Duration, asJSON bool) error {
	f := &follower{a: a, thread: thread, seq: seq, asJSON: asJSON, enc: json.NewEncoder(a.stdout)}
	for env, err := range cl.Watch(ctx, thread, seq) {
		if err != nil {
			return waitError(ctx, url, limit, err)
		}
		if done, err := f.step(env); done || err != nil {
			return err
		}
	}
	// Watch ends quietly only when ctx does.
	return waitError(ctx, url, limit, ctx.Err())
}

// follower is the state of one post --follow.
type follower struct {
	a      *app
	thread string
	seq    uint64
	asJSON bool
	enc    *json.Encoder
	run    string          // the run that took the message; "" until one has
	text   strings.Builder // the outputs printed so far
}

// step handles one event of the thread; done once the run ended or asks.
func (f *follower) step(env events.Envelope) (done bool, err error) {
	ev := env.Event
	if env.Err != nil || ev == nil {
		return false, nil // a malformed event is no run's: watch shows it
	}
	if env.Seq == f.seq {
		return false, f.print(env)
	}
	if f.run == "" {
		f.run = takerOf(ev, f.seq)
		if f.run == "" {
			return false, nil
		}
		return false, f.print(env)
	}
	if runOf(ev) != f.run {
		return false, nil
	}
	if err := f.print(env); err != nil {
		return true, err
	}
	switch {
	case ev.GetRunOutput() != nil:
		f.output(ev.GetRunOutput().GetText())
	case ev.GetRequestOpened() != nil:
		f.endLine()
		if !f.asJSON {
			fmt.Fprintf(f.a.stdout, "%s asks: %s\n", f.run, ev.GetRequestOpened().GetQuestion())
			fmt.Fprintf(f.a.stderr, "answer it with: artifactr post %s ANSWER --follow\n", f.thread)
		}
		return true, nil
	case ev.GetRunCompleted() != nil:
		// The output the run ended with, where the outputs did not
		// already say it (an agent that writes only its final text).
		out := ev.GetRunCompleted().GetOutput()
		if rest, ok := strings.CutPrefix(out, f.text.String()); ok {
			f.output(rest)
		} else if out != "" {
			f.endLine()
			f.output(out)
		}
		f.endLine()
		return true, nil
	case ev.GetRunFailed() != nil:
		f.endLine()
		return true, failf("run %s failed: %s", f.run, ev.GetRunFailed().GetReason())
	case ev.GetRunAbandoned() != nil:
		f.endLine()
		return true, failf("run %s was abandoned (%s): its holder stopped before it ended; the message was consumed and will not be run again",
			f.run, ev.GetRunAbandoned().GetReason())
	}
	return false, nil
}

// print writes env as a JSON line, with --json.
func (f *follower) print(env events.Envelope) error {
	if !f.asJSON {
		return nil
	}
	return errOrNil(f.enc.Encode(toJSON(env)))
}

// output prints text as the run wrote it, without --json.
func (f *follower) output(text string) {
	if f.asJSON || text == "" {
		return
	}
	f.text.WriteString(text)
	fmt.Fprint(f.a.stdout, text)
}

// endLine ends the printed outputs with a newline, if they need one.
func (f *follower) endLine() {
	if s := f.text.String(); !f.asJSON && s != "" && !strings.HasSuffix(s, "\n") {
		fmt.Fprintln(f.a.stdout)
		f.text.WriteString("\n")
	}
}

// takerOf is the run that ev says took message seq, or "".
func takerOf(ev *eventspb.Event, seq uint64) string {
	switch {
	case ev.GetRunStarted() != nil && ev.GetRunStarted().GetPromptSeq() == seq:
		return ev.GetRunStarted().GetRunId()
	case ev.GetAnswerGiven() != nil && ev.GetAnswerGiven().GetMessageSeq() == seq:
		return ev.GetAnswerGiven().GetRunId()
	case ev.GetSteeringGiven() != nil && ev.GetSteeringGiven().GetMessageSeq() == seq:
		return ev.GetSteeringGiven().GetRunId()
	}
	return ""
}

// runOf is the run ev belongs to, "" for events of no run.
func runOf(ev *eventspb.Event) string {
	type runEvent interface{ GetRunId() string }
	for _, b := range []runEvent{ev.GetRunOutput(), ev.GetRequestOpened(), ev.GetAnswerGiven(), ev.GetSteeringGiven(),
		ev.GetRunInterrupted(), ev.GetRunCompleted(), ev.GetRunFailed(), ev.GetRunAbandoned()} {
		if id := b.GetRunId(); id != "" {
			return id
		}
	}
	return ""
}
