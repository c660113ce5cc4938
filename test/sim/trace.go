package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/artifactr/artifactr/actors/thread"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// How actions read in a trace: holders and log sequences, never times or
// random ids, so two runs of one seed print the same trace.

func runFinished(r *run) thread.RunFinished {
	if r.cancelled {
		return thread.RunFinished{RunID: r.id, Err: context.Canceled}
	}
	return thread.RunFinished{RunID: r.id, Output: "done"}
}

// describe names an event by its type and the fields the checks use.
func describe(ev *eventspb.Event) string {
	switch b := ev.GetBody().(type) {
	case *eventspb.Event_MessagePosted:
		return "message_posted " + b.MessagePosted.GetMessageId()
	case *eventspb.Event_ThreadClaimed:
		return "thread_claimed by " + b.ThreadClaimed.GetHolder()
	case *eventspb.Event_ThreadReleased:
		return fmt.Sprintf("thread_released of claim %d", ev.GetClaimSeq())
	case *eventspb.Event_RunStarted:
		return fmt.Sprintf("run_started %s prompt %d", b.RunStarted.GetRunId(), b.RunStarted.GetPromptSeq())
	case *eventspb.Event_RunOutput:
		return "run_output " + b.RunOutput.GetRunId()
	case *eventspb.Event_RequestOpened:
		return "request_opened " + b.RequestOpened.GetRequestId()
	case *eventspb.Event_AnswerGiven:
		return fmt.Sprintf("answer_given %s message %d", b.AnswerGiven.GetRequestId(), b.AnswerGiven.GetMessageSeq())
	case *eventspb.Event_SteeringGiven:
		return fmt.Sprintf("steering_given %s message %d", b.SteeringGiven.GetRunId(), b.SteeringGiven.GetMessageSeq())
	case *eventspb.Event_RunCompleted:
		return "run_completed " + b.RunCompleted.GetRunId()
	case *eventspb.Event_RunFailed:
		return "run_failed " + b.RunFailed.GetRunId()
	case *eventspb.Event_RunAbandoned:
		return fmt.Sprintf("run_abandoned %s (started under %d)", b.RunAbandoned.GetRunId(), b.RunAbandoned.GetStartedClaimSeq())
	}
	return "unknown event"
}

func describeCheck(c events.Check) string {
	switch c.Mode {
	case events.CheckFence:
		if c.Guarded {
			return fmt.Sprintf("[fenced by claim %d, guarded at run seq %d]", c.Seq, c.RunSeq)
		}
		return fmt.Sprintf("[fenced by claim %d]", c.Seq)
	case events.CheckSubject:
		return fmt.Sprintf("[expect run subject at %d]", c.Seq)
	}
	return "[no check]"
}

func describeInput(in thread.Input) string {
	switch in := in.(type) {
	case thread.Observed:
		if in.Env.Event == nil {
			return fmt.Sprintf("observes %d (malformed)", in.Env.Seq)
		}
		return fmt.Sprintf("observes %d %s", in.Env.Seq, describe(in.Env.Event))
	case thread.AppendDone:
		return "gets append result " + outcome(in.Ack, in.Err)
	case thread.Synced:
		return fmt.Sprintf("gets synced to %d", in.LastSeq)
	case thread.RunOutput:
		return "hears output of " + in.RunID
	case thread.RunAsked:
		return "hears request " + in.RequestID
	case thread.RunSteer:
		return "hears " + in.RunID + " ask for steering"
	case thread.RunFinished:
		if in.Err != nil {
			return fmt.Sprintf("hears %s failed (%v)", in.RunID, in.Err)
		}
		return fmt.Sprintf("hears %s completed", in.RunID)
	case thread.LeaseLost:
		return "hears lease lost"
	case thread.Tick:
		return "ticks"
	}
	return fmt.Sprintf("%T", in)
}

// describeReady lists what a Ready asks for, or "" when nothing.
func describeReady(rd thread.Ready) string {
	var parts []string
	for _, id := range rd.Cancel {
		parts = append(parts, "cancel "+id)
	}
	for _, s := range rd.Start {
		parts = append(parts, fmt.Sprintf("start %s on %d", s.RunID, s.Prompt.Seq))
	}
	for _, d := range rd.Deliver {
		parts = append(parts, fmt.Sprintf("deliver %d to %s%s", d.Message.Seq, d.RunID, orSteer(d.RequestID)))
	}
	for _, id := range rd.Steered {
		parts = append(parts, "answer "+id+"'s steering ask")
	}
	if rd.Append != nil {
		parts = append(parts, "append "+describe(rd.Append.Event))
	}
	if rd.Sync {
		parts = append(parts, "sync")
	}
	if rd.Release != nil {
		parts = append(parts, "release")
	}
	if rd.Stop {
		parts = append(parts, "stop")
	}
	if len(parts) == 0 {
		return ""
	}
	return " => " + strings.Join(parts, ", ")
}

func orSteer(req string) string {
	if req == "" {
		return " as steering"
	}
	return " answering " + req
}

func outcome(ack events.Ack, err error) string {
	if err != nil {
		return short(err)
	}
	return fmt.Sprintf("seq %d%s", ack.Seq, dupNote(ack))
}

func dupNote(ack events.Ack) string {
	if ack.Duplicate {
		return " (duplicate)"
	}
	return ""
}

func errOK(err error) string {
	if err == nil {
		return "ok"
	}
	return short(err)
}

// short names an error by the sentinel it wraps.
func short(err error) string {
	for _, s := range []error{events.ErrThreadBusy, events.ErrConflict, events.ErrLeaseLost, events.ErrUnavailable} {
		if errors.Is(err, s) {
			name := strings.TrimPrefix(s.Error(), "events: ")
			if errors.Is(err, events.ErrUnavailable) && strings.Contains(err.Error(), "ack lost") {
				name += ", ack lost"
			}
			return name
		}
	}
	return err.Error()
}
