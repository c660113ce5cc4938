package projections

import (
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// Fork is a thread_forked: the thread's history was copied from Source's
// fold at SourceSeq.
//
// The semantics (issue 15): the new thread's history is the source's
// messages and runs up to SourceSeq, and nothing of it is live.
//   - Every copied message is consumed, as [ConsumedForked] at Seq, whether
//     the source had consumed it or not. A message still pending in the
//     source at SourceSeq is history here, not a prompt: the source may yet
//     answer it, and one message answered in two threads is two replies a
//     person sees. Post it again to the new thread to have it answered there.
//   - Copied runs are ended: StartSeq and ClaimSeq 0, EndSeq the fork's
//     sequence. A run active in the source at SourceSeq is
//     [RunAbandoned] here, with its outputs so far; its open requests are
//     not copied. So no run is active after a fork (I3) and no copied
//     message can be consumed again without an I1 anomaly.
//   - The copied messages keep their sequences in the thread they were
//     posted to; they are all below the fork's own sequence, so the new
//     thread's messages stay in sequence order and a run's history (the
//     messages before its prompt) starts with them.
//
// A fork by reference (issue 25) copies nothing: its readers resolve it
// from the source's log ([ResolveFork]) and the fold applies that history
// exactly as the copied form's, so both forms fold the same.
type Fork struct {
	Source    string `json:"source"`
	SourceSeq uint64 `json:"source_seq"`
	Seq       uint64 `json:"seq"` // the thread_forked event
	// Reference says the event names the history instead of copying it.
	Reference bool `json:"reference,omitempty"`
	// Unresolved says the history of a fork by reference was not given to
	// this fold: it holds none of the source's messages and runs, so its
	// history (and the I1 check of a run that names one of them) is not
	// this fold's to tell. A reader that needs them resolves the fork.
	Unresolved bool `json:"unresolved,omitempty"`
}

// Fresh implements [State].
func (t threadFold) Fresh() bool {
	return t.Fork == nil && len(t.Messages) == 0 && len(t.Runs) == 0 && t.Claim.Seq == 0 &&
		t.LastClaimSubjectSeq == 0 && t.LastRunSubjectSeq == 0
}

// Forked implements [State].
func (t threadFold) Forked(env *events.Envelope, b *eventspb.ThreadForked) {
	t.Fork = &Fork{Source: b.GetSourceThread(), SourceSeq: b.GetSourceSeq(), Seq: env.Seq,
		Reference: env.Event.GetThreadForked().GetReference(), Unresolved: b.GetReference()}
	for _, m := range b.GetMessages() {
		t.Messages = append(t.Messages, Message{
			Seq: m.GetSeq(), MessageID: m.GetMessageId(), Author: m.GetAuthor(), Text: m.GetText(),
			Posted:   m.GetPosted().AsTime(),
			Consumed: &Consumption{Kind: ConsumedForked, RunID: m.GetRunId(), Seq: env.Seq},
		})
	}
	if n := len(t.Messages); n > 0 {
		t.Taken, t.next = t.Messages[n-1].Seq, n
	}
	for _, r := range b.GetRuns() {
		run := &Run{
			ID: r.GetRunId(), PromptSeq: r.GetPromptSeq(), Agent: r.GetAgent(), EndSeq: env.Seq,
			Status: RunStatus(r.GetStatus()), Outputs: r.GetOutputs(), Output: r.GetOutput(), Reason: r.GetReason(),
		}
		if run.Status == RunActive {
			run.Status = RunAbandoned
			run.Reason = fmt.Sprintf("active in %s at %d: a fork carries no run over", b.GetSourceThread(), b.GetSourceSeq())
		}
		t.Runs = append(t.Runs, run)
	}
}

// ForkBodyError says what is wrong with b as thread_forked at seq of
// thread, or returns "": the rule every fold of a fork shares.
func ForkBodyError(thread string, seq uint64, b *eventspb.ThreadForked) string {
	src, at := b.GetSourceThread(), b.GetSourceSeq()
	switch {
	case events.ValidateThreadID(src) != nil || src == thread:
		return fmt.Sprintf("thread_forked names source thread %q", src)
	case at == 0 || at >= seq:
		return fmt.Sprintf("thread_forked at %d names source seq %d, not an earlier event", seq, at)
	case b.GetReference() && (len(b.GetMessages()) > 0 || len(b.GetRuns()) > 0):
		return fmt.Sprintf("thread_forked by reference carries %d messages and %d runs: it copies none", len(b.GetMessages()), len(b.GetRuns()))
	}
	var prev uint64
	for _, m := range b.GetMessages() {
		if m.GetSeq() <= prev || m.GetSeq() > at {
			return fmt.Sprintf("thread_forked copies message %d out of order or past its source seq %d", m.GetSeq(), at)
		}
		prev = m.GetSeq()
	}
	for _, r := range b.GetRuns() {
		switch RunStatus(r.GetStatus()) {
		case RunActive, RunCompleted, RunFailed, RunAbandoned:
		default:
			return fmt.Sprintf("thread_forked copies run %q with status %q", r.GetRunId(), r.GetStatus())
		}
	}
	return ""
}

// ForkBody returns the thread_forked body that copies t's history: t must
// be the source's fold up to the sequence the fork names, which must be the
// sequence of one of the source's events. See [Fork] for what is copied.
func ForkBody(t *Thread, seq uint64) *eventspb.ThreadForked {
	b := &eventspb.ThreadForked{SourceThread: t.ID, SourceSeq: seq}
	for _, m := range t.Messages {
		fm := &eventspb.ForkedMessage{
			Seq: m.Seq, MessageId: m.MessageID, Author: m.Author, Text: m.Text, Posted: timestamppb.New(m.Posted),
		}
		if c := m.Consumed; c != nil {
			fm.ConsumedAs, fm.RunId = string(c.Kind), c.RunID
		}
		b.Messages = append(b.Messages, fm)
	}
	for _, r := range t.Runs {
		b.Runs = append(b.Runs, &eventspb.ForkedRun{
			RunId: r.ID, PromptSeq: r.PromptSeq, Agent: r.Agent, Outputs: r.Outputs,
			Output: r.Output, Status: string(r.Status), Reason: r.Reason,
		})
	}
	return b
}
