package projections

import (
	"fmt"

	"artifactr/events"
	"artifactr/events/eventspb"
)

// Apply folds env into t. It is deterministic and total: it does no I/O,
// reads no clock and never panics on any envelope.
//
//   - An envelope whose Seq is not after LastSeq was applied already and is
//     skipped, so redeliveries are harmless.
//   - A malformed envelope (Err set, no known body, header or subject that
//     contradicts the body) or one of another thread becomes an [Anomaly] and
//     changes nothing else. LastSeq still advances, and an envelope on this
//     thread's claim or run subject still advances LastClaimSubjectSeq or
//     LastRunSubjectSeq, because JetStream counts it in its expected-sequence
//     checks whatever its payload.
//   - An event that contradicts the state is recorded as an Anomaly. A
//     consuming event (run_started, answer_given, steering_given) consumes
//     its message whatever else is wrong with it, because a writer handed the
//     message out: the state must never offer it again (I1). A run_started
//     always starts its run, so the state follows the log (I3). Any other
//     contradicted event changes nothing.
func (t *Thread) Apply(env events.Envelope) {
	e := &env // the helpers share it rather than copy it
	if env.Seq <= t.LastSeq {
		return
	}
	t.LastSeq = e.Seq
	ev := env.Event
	typ := events.TypeOf(ev)
	if env.Thread != t.ID {
		t.anomaly(e, typ, fmt.Sprintf("event of thread %q, not %q", env.Thread, t.ID))
		return
	}
	t.LastActivity = env.Stored
	kind := env.Kind
	if kind == "" {
		kind = typ.Kind()
	}
	switch kind {
	case events.KindClaim:
		t.LastClaimSubjectSeq = env.Seq
	case events.KindRun:
		t.LastRunSubjectSeq = env.Seq
	case events.KindPosted:
		t.LastPostedSubjectSeq = env.Seq
	}
	if reason := malformed(e, typ, t.ID); reason != "" {
		t.anomaly(e, typ, reason)
		return
	}
	switch b := ev.GetBody().(type) {
	case *eventspb.Event_MessagePosted:
		t.post(e, b.MessagePosted)
	case *eventspb.Event_ThreadClaimed:
		t.claimed(e, b.ThreadClaimed)
	case *eventspb.Event_ThreadReleased:
		t.released(e, b.ThreadReleased)
	case *eventspb.Event_RunStarted:
		t.startRun(e, b.RunStarted)
	case *eventspb.Event_RunOutput:
		t.output(e, b.RunOutput)
	case *eventspb.Event_RequestOpened:
		t.openRequest(e, b.RequestOpened)
	case *eventspb.Event_AnswerGiven:
		t.answer(e, b.AnswerGiven)
	case *eventspb.Event_SteeringGiven:
		t.steer(e, b.SteeringGiven)
	case *eventspb.Event_RunCompleted:
		if r := t.activeRun(e, b.RunCompleted.GetRunId()); r != nil {
			r.Output = b.RunCompleted.GetOutput()
			t.endRun(e, r, RunCompleted, "")
		}
	case *eventspb.Event_RunFailed:
		if r := t.activeRun(e, b.RunFailed.GetRunId()); r != nil {
			t.endRun(e, r, RunFailed, b.RunFailed.GetReason())
		}
	case *eventspb.Event_RunAbandoned:
		t.abandon(e, b.RunAbandoned)
	case *eventspb.Event_ThreadConfigured, *eventspb.Event_CancelRequested, *eventspb.Event_RunInterrupted:
		t.applyStrategy(e) // apply_strategy.go
	}
}

// malformed returns why env cannot be applied as an event of thread id, or ""
// when it can. Decode catches most of these; hand-made envelopes may not.
func malformed(env *events.Envelope, typ events.Type, id string) string {
	switch {
	case env.Err != nil:
		return env.Err.Error()
	case typ == "":
		return fmt.Sprintf("event has no known body (type header %q)", env.Type)
	case env.Event.GetThread() != id:
		return fmt.Sprintf("event names thread %q on a subject of thread %q", env.Event.GetThread(), id)
	case env.Type != "" && env.Type != typ:
		return fmt.Sprintf("type header %q names another body than %s", env.Type, typ)
	case env.Kind != "" && env.Kind != typ.Kind():
		return fmt.Sprintf("%s event on the %s subject", typ, env.Kind)
	}
	return ""
}

func (t *Thread) anomaly(env *events.Envelope, typ events.Type, reason string) {
	if typ == "" {
		typ = env.Type
	}
	t.Anomalies = append(t.Anomalies, Anomaly{Seq: env.Seq, Type: typ, Reason: reason})
}

func (t *Thread) anomalyf(env *events.Envelope, format string, args ...any) {
	t.anomaly(env, events.TypeOf(env.Event), fmt.Sprintf(format, args...))
}

func (t *Thread) post(env *events.Envelope, b *eventspb.MessagePosted) {
	t.Messages = append(t.Messages, Message{
		Seq:       env.Seq,
		MessageID: b.GetMessageId(),
		Author:    b.GetAuthor(),
		Text:      b.GetText(),
		Posted:    env.Stored,
	})
	t.Messages[len(t.Messages)-1].TraceParent = env.TraceParent
	t.postStrategy(b) // apply_strategy.go
}

func (t *Thread) claimed(env *events.Envelope, b *eventspb.ThreadClaimed) {
	holder := b.GetHolder()
	if holder == "" {
		holder = env.Event.GetHolder()
	}
	t.Claim = Claim{Holder: holder, Seq: env.Seq, LeaseRevision: b.GetLeaseRevision()}
}

// released marks the newest claim released, if the release is that claim's.
func (t *Thread) released(env *events.Envelope, b *eventspb.ThreadReleased) {
	cs := env.Event.GetClaimSeq()
	switch {
	case t.Claim.Seq == 0 || cs != t.Claim.Seq:
		t.anomalyf(env, "release of claim %d, but the newest claim is %d", cs, t.Claim.Seq)
	case t.Claim.Released:
		t.anomalyf(env, "claim %d is already released", cs)
	case env.Event.GetHolder() != t.Claim.Holder:
		t.anomalyf(env, "release of claim %d by %q, but its holder is %q", cs, env.Event.GetHolder(), t.Claim.Holder)
	default:
		t.Claim.Released = true
	}
}

// startRun starts the run even when one is active (I3) or its prompt is
// wrong (I1): the log says it started, and the state follows the log.
func (t *Thread) startRun(env *events.Envelope, b *eventspb.RunStarted) {
	if a := t.ActiveRun; a != nil {
		t.anomalyf(env, "I3: run %q started while run %q, started at %d, is active", b.GetRunId(), a.ID, a.StartSeq)
	}
	r := &Run{
		ID:        b.GetRunId(),
		PromptSeq: b.GetPromptSeq(),
		StartSeq:  env.Seq,
		ClaimSeq:  env.Event.GetClaimSeq(),
		Holder:    env.Event.GetHolder(),
		Agent:     b.GetAgent(),
		Status:    RunActive,
	}
	t.consume(env, r.PromptSeq, ConsumedPrompt, r.ID)
	t.Runs = append(t.Runs, r)
	t.ActiveRun = r
}

func (t *Thread) output(env *events.Envelope, b *eventspb.RunOutput) {
	if r := t.activeRun(env, b.GetRunId()); r != nil {
		r.Outputs = append(r.Outputs, b.GetText())
	}
}

func (t *Thread) openRequest(env *events.Envelope, b *eventspb.RequestOpened) {
	r := t.activeRun(env, b.GetRunId())
	if r == nil {
		return
	}
	id := b.GetRequestId()
	if q, dup := t.Requests[id]; dup {
		t.anomalyf(env, "request %q is already open since %d (run %q)", id, q.OpenedSeq, q.RunID)
		return
	}
	if t.Requests == nil {
		t.Requests = make(map[string]*Request)
	}
	t.Requests[id] = &Request{ID: id, RunID: r.ID, Question: b.GetQuestion(), OpenedSeq: env.Seq}
	r.Requests = append(r.Requests, id)
}

// answer consumes the answer's message in any case (see Apply), and marks
// the request answered only when it is an open request of the active run.
func (t *Thread) answer(env *events.Envelope, b *eventspb.AnswerGiven) {
	id, run := b.GetRequestId(), b.GetRunId()
	q := t.Requests[id]
	ok := false
	switch a := t.ActiveRun; {
	case a == nil || a.ID != run:
		t.notActive(env, run)
	case q == nil:
		t.anomalyf(env, "answer to unknown request %q", id)
	case q.RunID != run || q.OpenedSeq < a.StartSeq:
		t.anomalyf(env, "answer to request %q of another run (%q, opened at %d)", id, q.RunID, q.OpenedSeq)
	case q.Answered:
		t.anomalyf(env, "request %q was already answered at %d", id, q.AnswerSeq)
	case q.Closed:
		t.anomalyf(env, "request %q is closed: its run ended", id)
	default:
		ok = true
	}
	t.consume(env, b.GetMessageSeq(), ConsumedAnswer, run)
	if ok {
		q.Answered, q.AnswerSeq, q.MessageSeq = true, env.Seq, b.GetMessageSeq()
	}
}

func (t *Thread) steer(env *events.Envelope, b *eventspb.SteeringGiven) {
	r := t.activeRun(env, b.GetRunId())
	t.consume(env, b.GetMessageSeq(), ConsumedSteering, b.GetRunId())
	if r != nil {
		r.Steering = append(r.Steering, b.GetMessageSeq())
	}
}

func (t *Thread) abandon(env *events.Envelope, b *eventspb.RunAbandoned) {
	if n := len(t.Runs); t.ActiveRun == nil && n > 0 && t.Runs[n-1].ID == b.GetRunId() &&
		(t.Runs[n-1].Status == RunCompleted || t.Runs[n-1].Status == RunFailed) {
		// The run's own holder recorded its end first: the new claimant
		// planned the abandon before the end reached it. Nothing to undo.
		return
	}
	r := t.activeRun(env, b.GetRunId())
	if r == nil {
		return
	}
	if b.GetStartedClaimSeq() != r.ClaimSeq {
		t.anomalyf(env, "run %q started under claim %d, not %d as its abandon says", r.ID, r.ClaimSeq, b.GetStartedClaimSeq())
	}
	t.endRun(env, r, RunAbandoned, b.GetReason())
}

// endRun ends the active run r and closes its requests.
func (t *Thread) endRun(env *events.Envelope, r *Run, s RunStatus, reason string) {
	r.Status, r.EndSeq, r.Reason = s, env.Seq, reason
	for _, id := range r.Requests {
		if q := t.Requests[id]; q != nil {
			q.Closed = true
		}
	}
	t.ActiveRun = nil
}

// consume marks message seq consumed by env. It records an anomaly when the
// message was not posted, was consumed already (I1; the first consumption
// stands), or is not the oldest pending message.
func (t *Thread) consume(env *events.Envelope, seq uint64, kind ConsumptionKind, run string) {
	i, ok := t.messageIndex(seq)
	if !ok {
		t.anomalyf(env, "%s names message %d, which was not posted in this thread", kind, seq)
		return
	}
	m := &t.Messages[i]
	if c := m.Consumed; c != nil {
		t.anomalyf(env, "I1: message %d was already consumed as a %s at %d", seq, c.Kind, c.Seq)
		return
	}
	if p := t.pendingIndex(); p != i {
		t.anomalyf(env, "message %d is not the oldest pending message", seq)
	}
	m.Consumed = &Consumption{Kind: kind, RunID: run, Seq: env.Seq}
	if seq > t.Taken {
		t.Taken, t.next = seq, i+1
	}
}

// activeRun returns the active run if its id is run; otherwise it records an
// anomaly and returns nil.
func (t *Thread) activeRun(env *events.Envelope, run string) *Run {
	if a := t.ActiveRun; a != nil && a.ID == run {
		return a
	}
	t.notActive(env, run)
	return nil
}

// notActive records that env names run, which is not the active run. It
// scans Runs only on this anomaly path, to say what became of the run.
func (t *Thread) notActive(env *events.Envelope, run string) {
	for i := len(t.Runs) - 1; i >= 0; i-- {
		if r := t.Runs[i]; r.ID == run && r.Status != RunActive {
			t.anomalyf(env, "run %q is not active: it was %s at %d", run, r.Status, r.EndSeq)
			return
		}
	}
	if a := t.ActiveRun; a != nil {
		t.anomalyf(env, "run %q is not the active run %q", run, a.ID)
		return
	}
	t.anomalyf(env, "run %q is not active: no run is", run)
}
