package events

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/artifactr/artifactr/events/eventspb"
)

// Builders for the events a claim holder writes. Each stamps the writer's
// claim (the fencing token and holder) and the given time.

func held(c Claim, now time.Time) *eventspb.Event {
	return &eventspb.Event{Thread: c.Thread, Time: timestamppb.New(now), ClaimSeq: c.Seq, Holder: c.Holder}
}

// NewRunStarted builds run_started, consuming the prompt message. Fenced.
func NewRunStarted(c Claim, now time.Time, runID string, promptSeq uint64, agent string) *eventspb.Event {
	ev := held(c, now)
	ev.Body = &eventspb.Event_RunStarted{RunStarted: &eventspb.RunStarted{RunId: runID, PromptSeq: promptSeq, Agent: agent}}
	return ev
}

// NewRunOutput builds run_output.
func NewRunOutput(c Claim, now time.Time, runID, text string) *eventspb.Event {
	ev := held(c, now)
	ev.Body = &eventspb.Event_RunOutput{RunOutput: &eventspb.RunOutput{RunId: runID, Text: text}}
	return ev
}

// NewRequestOpened builds request_opened.
func NewRequestOpened(c Claim, now time.Time, runID, requestID, question string) *eventspb.Event {
	ev := held(c, now)
	ev.Body = &eventspb.Event_RequestOpened{RequestOpened: &eventspb.RequestOpened{RunId: runID, RequestId: requestID, Question: question}}
	return ev
}

// NewAnswerGiven builds answer_given, consuming a message. Fenced.
func NewAnswerGiven(c Claim, now time.Time, runID, requestID string, messageSeq uint64) *eventspb.Event {
	ev := held(c, now)
	ev.Body = &eventspb.Event_AnswerGiven{AnswerGiven: &eventspb.AnswerGiven{RunId: runID, RequestId: requestID, MessageSeq: messageSeq}}
	return ev
}

// NewSteeringGiven builds steering_given, consuming a message. Fenced.
func NewSteeringGiven(c Claim, now time.Time, runID string, messageSeq uint64) *eventspb.Event {
	ev := held(c, now)
	ev.Body = &eventspb.Event_SteeringGiven{SteeringGiven: &eventspb.SteeringGiven{RunId: runID, MessageSeq: messageSeq}}
	return ev
}

// NewRunCompleted builds run_completed.
func NewRunCompleted(c Claim, now time.Time, runID, output string) *eventspb.Event {
	ev := held(c, now)
	ev.Body = &eventspb.Event_RunCompleted{RunCompleted: &eventspb.RunCompleted{RunId: runID, Output: output}}
	return ev
}

// NewRunFailed builds run_failed.
func NewRunFailed(c Claim, now time.Time, runID, reason string) *eventspb.Event {
	ev := held(c, now)
	ev.Body = &eventspb.Event_RunFailed{RunFailed: &eventspb.RunFailed{RunId: runID, Reason: reason}}
	return ev
}

// NewRunAbandoned builds run_abandoned for a run started under an older
// claim. Fenced.
func NewRunAbandoned(c Claim, now time.Time, runID string, startedClaimSeq uint64, reason string) *eventspb.Event {
	ev := held(c, now)
	ev.Body = &eventspb.Event_RunAbandoned{RunAbandoned: &eventspb.RunAbandoned{RunId: runID, StartedClaimSeq: startedClaimSeq, Reason: reason}}
	return ev
}
