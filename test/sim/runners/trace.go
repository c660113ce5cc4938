package runners

import (
	"errors"
	"fmt"
	"strings"

	"github.com/artifactr/artifactr/actors/runner/sched"
	"github.com/artifactr/artifactr/actors/thread"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/eventstest"
)

// How actions read in a trace: runners, threads, holders and sequences,
// never random ids, so two runs of a seed print the same trace.

func (w *world) describeEvent(ev sched.Event) string {
	switch e := ev.(type) {
	case sched.Routed:
		return fmt.Sprintf("routes %d %s %s", e.Env.Seq, e.Env.Thread, e.Env.Type)
	case sched.Woken:
		return "woken for " + e.Thread
	case sched.PeekDone:
		return fmt.Sprintf("peeked %s: work %v %s", e.Thread, e.Work, errOK(e.Err))
	case sched.ClaimDone:
		return fmt.Sprintf("claimed %s: %s", e.Thread, claimOutcome(&e))
	case sched.Spawned:
		return "spawned " + e.Spawn.Thread
	case sched.Terminated:
		return fmt.Sprintf("actor of %s ended %+v", e.Thread, e)
	case sched.LeaseChanged:
		u := e.Update
		switch {
		case u.CaughtUp:
			return "lease watch caught up"
		case u.Thread != "":
			return fmt.Sprintf("lease of %s: present %v session %s", u.Thread, u.Present, w.sid(u.Session))
		}
		return fmt.Sprintf("session %s present %v", w.sid(u.Session), u.Present)
	case sched.SessionOpened:
		return "session opened " + w.sid(e.Session.ID)
	case sched.SessionRenewed:
		return "session renewed"
	case sched.SessionLost:
		return "session lost " + w.sid(e.ID)
	case sched.Tick:
		return "ticks"
	}
	return fmt.Sprintf("%T", ev)
}

func describeReady(rd sched.Ready) string {
	var parts []string
	if rd.Forward {
		parts = append(parts, "forward")
	}
	for _, th := range rd.Peeks {
		parts = append(parts, "peek "+th)
	}
	for _, c := range rd.Claims {
		parts = append(parts, "claim "+c.Thread)
	}
	if rd.Spawn != nil {
		parts = append(parts, "spawn "+rd.Spawn.Thread)
	}
	if n := len(rd.Acks); n > 0 {
		parts = append(parts, fmt.Sprintf("%d acks", n))
	}
	for _, th := range rd.SessionGone {
		parts = append(parts, "session gone "+th)
	}
	for _, t := range rd.Timers {
		parts = append(parts, fmt.Sprintf("%s %s at +%s", t.Kind, t.Thread, t.At.Sub(eventstest.Epoch)))
	}
	if len(parts) == 0 {
		return ""
	}
	return " => " + strings.Join(parts, ", ")
}

func describeThreadReady(rd thread.Ready) string {
	var b strings.Builder
	for _, s := range rd.Start {
		fmt.Fprintf(&b, " start %s on %d", s.RunID, s.Prompt.Seq)
	}
	for _, d := range rd.Deliver {
		fmt.Fprintf(&b, " deliver %d to %s", d.Message.Seq, d.RunID)
	}
	if rd.Append != nil {
		b.WriteString(" append " + describe(rd.Append.Event))
	}
	if rd.Sync {
		b.WriteString(" sync")
	}
	if rd.Release != nil {
		b.WriteString(" release")
	}
	if rd.Stop {
		fmt.Fprintf(&b, " stop (%v)", rd.StopErr)
	}
	return b.String()
}

func describeInput(in thread.Input) string {
	switch in := in.(type) {
	case thread.RunOutput:
		return "output"
	case thread.RunAsked:
		return "asks " + in.RequestID
	case thread.RunSteer:
		return "asks for steering"
	case thread.RunFinished:
		if in.Err != nil {
			return "failed: " + in.Err.Error()
		}
		return "completed"
	}
	return fmt.Sprintf("%T", in)
}

func describe(ev *eventspb.Event) string {
	switch b := ev.GetBody().(type) {
	case *eventspb.Event_ThreadClaimed:
		return "thread_claimed by " + b.ThreadClaimed.GetHolder()
	case *eventspb.Event_ThreadReleased:
		return fmt.Sprintf("thread_released of claim %d", ev.GetClaimSeq())
	case *eventspb.Event_RunStarted:
		return fmt.Sprintf("run_started %s prompt %d", b.RunStarted.GetRunId(), b.RunStarted.GetPromptSeq())
	case *eventspb.Event_AnswerGiven:
		return fmt.Sprintf("answer_given %s message %d", b.AnswerGiven.GetRequestId(), b.AnswerGiven.GetMessageSeq())
	case *eventspb.Event_SteeringGiven:
		return fmt.Sprintf("steering_given %s message %d", b.SteeringGiven.GetRunId(), b.SteeringGiven.GetMessageSeq())
	case *eventspb.Event_RunAbandoned:
		return "run_abandoned " + b.RunAbandoned.GetRunId()
	}
	return string(events.TypeOf(ev))
}

func claimOutcome(cd *sched.ClaimDone) string {
	if cd.Err != nil {
		return short(cd.Err)
	}
	return fmt.Sprintf("claim_seq %d, history to %d", cd.Claim.Seq, lastSeq(cd.History))
}

func lastSeq(envs []events.Envelope) uint64 {
	if len(envs) == 0 {
		return 0
	}
	return envs[len(envs)-1].Seq
}

func outcome(ack events.Ack, err error) string {
	if err != nil {
		return short(err)
	}
	return fmt.Sprintf("seq %d", ack.Seq)
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
			return strings.TrimPrefix(s.Error(), "events: ")
		}
	}
	return err.Error()
}

// sid names a session without its random part: memstore's by its
// counter, natsstore's (a nuid) by the order the simulation opened it.
func (w *world) sid(id string) string {
	if name, ok := w.names[id]; ok {
		return name
	}
	n, _, _ := strings.Cut(id, "-")
	return n
}
