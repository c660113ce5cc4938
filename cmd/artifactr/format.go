package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// maxShown cuts texts in human-readable lines, so one long message does not
// flood a terminal; --json shows them whole.
const maxShown = 80

// formatEvent renders env as one line a person can read:
//
//	15:04:05.000 12 t1 run_started run=run-5-7 prompt=5 claim=7 holder=r1/ab12
func formatEvent(env events.Envelope) string {
	var b strings.Builder
	b.WriteString(env.Stored.Local().Format("15:04:05.000"))
	fmt.Fprintf(&b, " %d %s %s", env.Seq, orDash(env.Thread), orDash(string(env.Type)))
	for _, kv := range eventFields(env) {
		b.WriteString(" ")
		b.WriteString(kv)
	}
	return b.String()
}

// eventFields returns the key=value fields worth showing for env.
func eventFields(env events.Envelope) []string {
	if env.Err != nil || env.Event == nil {
		return []string{"malformed=" + quote(fmt.Sprint(env.Err))}
	}
	ev := env.Event
	claim := "claim=" + u(ev.GetClaimSeq())
	holder := "holder=" + orDash(ev.GetHolder())
	switch b := ev.GetBody().(type) {
	case *eventspb.Event_MessagePosted:
		m := b.MessagePosted
		f := []string{"id=" + m.GetMessageId()}
		if m.GetAuthor() != "" {
			f = append(f, "author="+quote(m.GetAuthor()))
		}
		if m.GetStrategy() != "" {
			f = append(f, "strategy="+m.GetStrategy())
		}
		return append(f, "text="+quote(m.GetText()))
	case *eventspb.Event_ThreadClaimed:
		c := b.ThreadClaimed
		return []string{"claim=" + u(env.Seq), "holder=" + c.GetHolder(), "lease_rev=" + u(c.GetLeaseRevision()),
			"ttl=" + (time.Duration(c.GetLeaseTtlMs()) * time.Millisecond).String()}
	case *eventspb.Event_ThreadReleased:
		return []string{claim, holder, "reason=" + quote(b.ThreadReleased.GetReason())}
	case *eventspb.Event_RunStarted:
		r := b.RunStarted
		return []string{"run=" + r.GetRunId(), "prompt=" + u(r.GetPromptSeq()), claim, holder, "agent=" + r.GetAgent()}
	case *eventspb.Event_RunOutput:
		return []string{"run=" + b.RunOutput.GetRunId(), "text=" + quote(b.RunOutput.GetText())}
	case *eventspb.Event_RequestOpened:
		r := b.RequestOpened
		return []string{"run=" + r.GetRunId(), "request=" + r.GetRequestId(), "question=" + quote(r.GetQuestion())}
	case *eventspb.Event_AnswerGiven:
		r := b.AnswerGiven
		return []string{"run=" + r.GetRunId(), "request=" + r.GetRequestId(), "message=" + u(r.GetMessageSeq()), claim}
	case *eventspb.Event_SteeringGiven:
		r := b.SteeringGiven
		return []string{"run=" + r.GetRunId(), "message=" + u(r.GetMessageSeq()), claim}
	case *eventspb.Event_RunCompleted:
		return []string{"run=" + b.RunCompleted.GetRunId(), "output=" + quote(b.RunCompleted.GetOutput())}
	case *eventspb.Event_RunFailed:
		return []string{"run=" + b.RunFailed.GetRunId(), "reason=" + quote(b.RunFailed.GetReason())}
	case *eventspb.Event_RunAbandoned:
		r := b.RunAbandoned
		return []string{"run=" + r.GetRunId(), "started_claim=" + u(r.GetStartedClaimSeq()), claim, holder, "reason=" + quote(r.GetReason())}
	case *eventspb.Event_ThreadForked:
		f := b.ThreadForked
		if f.GetReference() {
			return []string{"source=" + f.GetSourceThread(), "at=" + u(f.GetSourceSeq()), "by=reference"}
		}
		return []string{"source=" + f.GetSourceThread(), "at=" + u(f.GetSourceSeq()),
			"messages=" + strconv.Itoa(len(f.GetMessages())), "runs=" + strconv.Itoa(len(f.GetRuns()))}
	case *eventspb.Event_ThreadConfigured:
		return []string{"strategy=" + b.ThreadConfigured.GetStrategy()}
	case *eventspb.Event_CancelRequested:
		return []string{"run=" + orDash(b.CancelRequested.GetRunId()), "request=" + b.CancelRequested.GetRequestId()}
	case *eventspb.Event_RunInterrupted:
		r := b.RunInterrupted
		return []string{"run=" + r.GetRunId(), "message=" + u(r.GetMessageSeq()), "rollback=" + strconv.FormatBool(r.GetRollback()), claim}
	}
	return nil
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// quote quotes s for a one-line display, cut to maxShown runes.
func quote(s string) string {
	if r := []rune(s); len(r) > maxShown {
		s = string(r[:maxShown]) + "…"
	}
	return strconv.Quote(s)
}

// eventJSON is the shape `watch --json` prints; main.go documents it.
type eventJSON = events.EnvelopeJSON

// toJSON converts env to its JSON shape.
func toJSON(env events.Envelope) eventJSON { return events.ToJSON(env) }
