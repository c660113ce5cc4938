package projections

import (
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// Apply folds env into t with the fold rules ([Rules]). It is deterministic
// and total: it does no I/O, reads no clock and never panics on any
// envelope.
//
//   - An envelope whose Seq is not after LastSeq was applied already and is
//     skipped, so redeliveries are harmless.
//   - A malformed envelope (Err set, no known body, header or subject that
//     contradicts the body) or one of another thread becomes an [Anomaly] and
//     changes nothing else. LastSeq still advances, and an envelope on this
//     thread's claim or run subject still advances LastClaimSubjectSeq or
//     LastRunSubjectSeq, because JetStream counts it in its expected-sequence
//     checks whatever its payload.
//   - An event that contradicts the state is recorded as an Anomaly; see
//     [Rules] for what it still changes.
func (t *Thread) Apply(env events.Envelope) {
	if env.Seq <= t.LastSeq {
		return
	}
	t.LastSeq = env.Seq
	// The rules take the envelope through an interface, which would move
	// a local copy to the heap on every event; the Thread's own is there.
	t.env = env
	Step(threadFold{t}, &t.env)
	t.env = events.Envelope{} // keep no event alive, and Threads comparable
}

// threadFold is a Thread as a [State]: its reads and changes below are
// bookkeeping only; the rules are in rules.go.
type threadFold struct{ *Thread }

// ThreadID implements [State].
func (t threadFold) ThreadID() string { return t.ID }

// NewestClaim implements [State].
func (t threadFold) NewestClaim() (uint64, bool) { return t.Claim.Seq, t.Claim.Released }

// IsHolder implements [State].
func (t threadFold) IsHolder(h string) bool { return t.Claim.Holder == h }

// ClaimHolder implements [State].
func (t threadFold) ClaimHolder() string { return t.Claim.Holder }

// Active implements [State].
func (t threadFold) Active() (start, claim uint64, ok bool) {
	if a := t.ActiveRun; a != nil {
		return a.StartSeq, a.ClaimSeq, true
	}
	return 0, 0, false
}

// IsActive implements [State].
func (t threadFold) IsActive(run string) bool { return t.ActiveRun != nil && t.ActiveRun.ID == run }

// ActiveID implements [State].
func (t threadFold) ActiveID() string {
	if t.ActiveRun == nil {
		return ""
	}
	return t.ActiveRun.ID
}

// IsRunHolder implements [State].
func (t threadFold) IsRunHolder(h string) bool { return t.ActiveRun != nil && t.ActiveRun.Holder == h }

// RunHolder implements [State].
func (t threadFold) RunHolder() string {
	if t.ActiveRun == nil {
		return ""
	}
	return t.ActiveRun.Holder
}

// LastRun implements [State].
func (t threadFold) LastRun() (string, RunStatus, uint64, bool) {
	n := len(t.Runs)
	if n == 0 {
		return "", "", 0, false
	}
	r := t.Runs[n-1]
	return r.ID, r.Status, r.EndSeq, true
}

// MessageOf implements [State].
func (t threadFold) MessageOf(seq uint64) MsgInfo {
	i, ok := t.messageIndex(seq)
	if !ok && t.compact.on && seq <= t.Taken {
		return MsgInfo{Status: MsgTaken} // forgotten: consumed, or no message
	}
	if !ok {
		if orig, rep := t.Reposts[seq]; rep {
			return MsgInfo{Status: MsgReposted, By: orig}
		}
		return MsgInfo{Status: MsgNotPosted}
	}
	if c := t.Messages[i].Consumed; c != nil {
		return MsgInfo{Status: MsgConsumed, By: c.Seq}
	}
	return MsgInfo{Status: MsgPending, Oldest: t.pendingIndex() == i}
}

// PostedID implements [State].
// A compact Thread knows that an id was posted, not where: it returns 0.
func (t threadFold) PostedID(id string) (uint64, bool) {
	if t.compact.on {
		return 0, t.compact.ids.has(fingerprint(id))
	}
	seq, ok := t.ids[id]
	if !ok && t.compact.expanded && t.compact.ids.has(fingerprint(id)) {
		return 0, true // an id of the part forgotten before the expansion
	}
	return seq, ok
}

// Reposted implements [State].
func (t threadFold) Reposted(env *events.Envelope, orig uint64) {
	if t.compact.on {
		return // a compact Thread keeps no reposts (compact.go)
	}
	if t.Reposts == nil {
		t.Reposts = make(map[uint64]uint64)
	}
	t.Reposts[env.Seq] = orig
}

// RequestOf implements [State].
func (t threadFold) RequestOf(id string) (ReqInfo, bool) {
	q := t.activeRequest(id)
	if q == nil {
		return ReqInfo{}, false
	}
	return ReqInfo{Opened: q.OpenedSeq, Answered: q.Answered, AnswerAt: q.AnswerSeq}, true
}

// activeRequest returns request id if the active run opened it.
func (t *Thread) activeRequest(id string) *Request {
	a := t.ActiveRun
	if a == nil {
		return nil
	}
	if q := t.Requests[id]; q != nil && q.RunID == a.ID && q.OpenedSeq > a.StartSeq {
		return q
	}
	return nil
}

// Seen implements [State].
func (t threadFold) Seen(env *events.Envelope, kind events.Kind) {
	if t.Created.IsZero() {
		t.Created = env.Stored
	}
	t.LastActivity = env.Stored
	switch kind {
	case events.KindClaim:
		t.LastClaimSubjectSeq = env.Seq
	case events.KindRun:
		t.LastRunSubjectSeq = env.Seq
	case events.KindPosted:
		t.LastPostedSubjectSeq = env.Seq
	}
}

// Post implements [State].
func (t threadFold) Post(env *events.Envelope, b *eventspb.MessagePosted) {
	t.Messages = append(t.Messages, Message{
		Seq:       env.Seq,
		MessageID: b.GetMessageId(),
		Author:    b.GetAuthor(),
		Text:      b.GetText(),
		Posted:    env.Stored,
		Assistant: b.GetAssistant(),
		Webhook:   b.GetWebhook(),
	})
	t.Messages[len(t.Messages)-1].TraceParent = env.TraceParent
	id := b.GetMessageId()
	if t.compact.on {
		t.pushRecent(env.Seq)
		if id != "" && env.FirstPost != env.Seq {
			// Only an id the store's index does not hold for this post is
			// remembered: the index answers for the others.
			t.compact.ids.add(fingerprint(id))
		}
		return
	}
	if id != "" {
		t.indexID(id, env.Seq)
		if env.FirstPost == env.Seq {
			t.indexed(id)
		}
	}
}

// Claimed implements [State].
func (t threadFold) Claimed(env *events.Envelope, holder string, b *eventspb.ThreadClaimed) {
	t.Claim = Claim{Holder: holder, Seq: env.Seq, LeaseRevision: b.GetLeaseRevision()}
}

// Released implements [State].
func (t threadFold) Released(*events.Envelope) { t.Claim.Released = true }

// Consume implements [State].
func (t threadFold) Consume(env *events.Envelope, seq uint64, kind ConsumptionKind, run string) {
	i, ok := t.messageIndex(seq)
	if !ok {
		return
	}
	t.Messages[i].Consumed = &Consumption{Kind: kind, RunID: run, Seq: env.Seq}
	if i != t.pendingIndex() {
		return // out of order: the older messages stay pending (see Taken)
	}
	for i++; i < len(t.Messages) && t.Messages[i].Consumed != nil; i++ {
	}
	t.Taken, t.next = t.Messages[i-1].Seq, i
}

// StartRun implements [State].
func (t threadFold) StartRun(env *events.Envelope, b *eventspb.RunStarted) {
	r := &Run{
		ID:        b.GetRunId(),
		PromptSeq: b.GetPromptSeq(),
		StartSeq:  env.Seq,
		ClaimSeq:  env.Event.GetClaimSeq(),
		Holder:    env.Event.GetHolder(),
		Agent:     b.GetAgent(),
		Status:    RunActive,
	}
	// Only a prompt this start consumed: a compact view has no other, and
	// both views must fold alike.
	if i, ok := t.messageIndex(r.PromptSeq); ok {
		if m := &t.Messages[i]; m.Consumed != nil && m.Consumed.Seq == env.Seq {
			r.PromptPosted, r.PromptTraceParent = m.Posted, m.TraceParent
		}
	}
	t.Runs = append(t.Runs, r)
	t.ActiveRun = r
}

// Output implements [State].
func (t threadFold) Output(_ *events.Envelope, b *eventspb.RunOutput) {
	if t.compact.on {
		return // no decision reads a run's text
	}
	t.ActiveRun.Outputs = append(t.ActiveRun.Outputs, b.GetText())
}

// OpenRequest implements [State]. A request id an earlier run used is
// reused: Requests keeps the newest request of each id.
func (t threadFold) OpenRequest(env *events.Envelope, b *eventspb.RequestOpened) {
	if t.Requests == nil {
		t.Requests = make(map[string]*Request)
	}
	r, id := t.ActiveRun, b.GetRequestId()
	t.Requests[id] = &Request{ID: id, RunID: r.ID, Question: b.GetQuestion(), OpenedSeq: env.Seq}
	r.Requests = append(r.Requests, id)
}

// Answered implements [State].
func (t threadFold) Answered(env *events.Envelope, b *eventspb.AnswerGiven) {
	q := t.activeRequest(b.GetRequestId())
	q.Answered, q.AnswerSeq, q.MessageSeq = true, env.Seq, b.GetMessageSeq()
}

// Steered implements [State].
func (t threadFold) Steered(_ *events.Envelope, b *eventspb.SteeringGiven) {
	if t.compact.on {
		return
	}
	t.ActiveRun.Steering = append(t.ActiveRun.Steering, b.GetMessageSeq())
}

// EndRun implements [State].
func (t threadFold) EndRun(env *events.Envelope, s RunStatus, output, reason string) {
	r := t.ActiveRun
	r.Status, r.EndSeq, r.Reason = s, env.Seq, reason
	if s == RunCompleted && !t.compact.on {
		r.Output = output
	}
	for _, id := range r.Requests {
		if q := t.Requests[id]; q != nil && q.RunID == r.ID {
			q.Closed = true
		}
	}
	t.ActiveRun = nil
}

// Anomaly implements [State].
func (t threadFold) Anomaly(env *events.Envelope, f Finding) {
	typ := events.TypeOf(env.Event)
	if typ == "" {
		typ = env.Type
	}
	t.Anomalies = append(t.Anomalies, Anomaly{Seq: env.Seq, Type: typ, Reason: f.Reason})
}
