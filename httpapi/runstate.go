package httpapi

import (
	"cmp"
	"strings"

	"github.com/artifactr/artifactr/projections"
)

// A LangGraph run is a posted message and the artifactr run that takes it
// (DESIGN §11). Its run id is the message's id, so it is known when the run
// is created, before any runner has seen it, and a retried create with the
// same message id is the same run. Its status comes from the log alone:
//
//   - pending: the message is posted and not yet consumed (or not yet
//     posted, for a run created with after_seconds);
//   - running: the artifactr run that consumed it (as prompt, answer or
//     steering) is active and asked nothing since;
//   - success: that run completed, or asked a question after taking the
//     message (an interrupt: LangGraph ends the run there, the thread
//     becomes "interrupted", and command.resume starts the next run);
//   - interrupted: the run failed "cancelled" or "interrupted" (a cancel,
//     or a post with the interrupt or rollback strategy);
//   - timeout: the run failed on a timeout;
//   - error: the run failed otherwise, or was abandoned by a takeover.

// lgRun is where a LangGraph run stands in a thread's fold.
type lgRun struct {
	Msg    *projections.Message
	Run    *projections.Run // the artifactr run that took it; nil while pending
	Status string
	// EndSeq is the stream sequence its status became final at, 0 while
	// pending or running; Asked is the request it ended on, if any.
	EndSeq uint64
	Asked  *projections.Request
}

// Final reports whether the run's status will not change.
func (r lgRun) Final() bool { return r.Status != "pending" && r.Status != "running" }

// findMessage returns the message with id in t, or nil.
func findMessage(t *projections.Thread, id string) *projections.Message {
	for i := len(t.Messages) - 1; i >= 0; i-- {
		if t.Messages[i].MessageID == id {
			return &t.Messages[i]
		}
	}
	return nil
}

func findRun(t *projections.Thread, id string) *projections.Run {
	for i := len(t.Runs) - 1; i >= 0; i-- {
		if t.Runs[i].ID == id {
			return t.Runs[i]
		}
	}
	return nil
}

// runOf returns the state of the LangGraph run of message m in t.
func runOf(t *projections.Thread, m *projections.Message) lgRun {
	lr := lgRun{Msg: m, Status: "pending"}
	if m.Consumed == nil {
		return lr
	}
	r := findRun(t, m.Consumed.RunID)
	if r == nil {
		lr.Status, lr.EndSeq = "success", m.Consumed.Seq // history a fork copied without its run
		return lr
	}
	lr.Run = r
	// The first request the run opened after taking the message ends the
	// LangGraph run, whatever comes after.
	for _, id := range r.Requests {
		q := t.Requests[id]
		if q == nil || q.RunID != r.ID || q.OpenedSeq <= m.Consumed.Seq {
			continue
		}
		if r.EndSeq == 0 || q.OpenedSeq < r.EndSeq {
			lr.Status, lr.EndSeq, lr.Asked = "success", q.OpenedSeq, q
			return lr
		}
	}
	switch r.Status {
	case projections.RunActive:
		lr.Status = "running"
		return lr
	case projections.RunCompleted:
		lr.Status = "success"
	case projections.RunFailed:
		switch {
		case cancelled(r.Reason):
			lr.Status = "interrupted"
		case strings.Contains(r.Reason, "timeout") || strings.Contains(r.Reason, "timed out") || strings.Contains(r.Reason, "deadline"):
			lr.Status = "timeout"
		default:
			lr.Status = "error"
		}
	default:
		lr.Status = "error"
	}
	lr.EndSeq = cmp.Or(r.EndSeq, m.Consumed.Seq)
	return lr
}

// runJSON is LangGraph's Run.
type runJSON struct {
	RunID             string         `json:"run_id"`
	ThreadID          string         `json:"thread_id"`
	AssistantID       string         `json:"assistant_id"`
	CreatedAt         string         `json:"created_at"`
	UpdatedAt         string         `json:"updated_at"`
	Status            string         `json:"status"`
	Metadata          map[string]any `json:"metadata"`
	MultitaskStrategy *string        `json:"multitask_strategy"`
	Kwargs            map[string]any `json:"kwargs"`
	// artifactr's own: the message's stream sequence and the run that took it.
	MessageSeq   uint64 `json:"artifactr_message_seq,omitempty"`
	ArtifactrRun string `json:"artifactr_run_id,omitempty"`
}
