package audit

import (
	"fmt"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections"
)

// auditFold is the Auditor as the [projections.State] of its current thread
// (Auditor.last): the fold rules decide, and it records in the compact
// state. It also reports the findings the spec's invariants name as
// violations (Spec: I1_ConsumedAtMostOnce, I3_OneActiveRun, AnswerOnce,
// NoEndAfterAbandon), and the others as anomalies.
type auditFold Auditor

// ThreadID is the audited envelope's thread, which is the current thread's
// id (Auditor.thread looked it up by it): the rules compare it with the
// envelope's, and the same string compares without reading the thread's.
func (f *auditFold) ThreadID() string { return f.env.Thread }

func (f *auditFold) NewestClaim() (uint64, bool) {
	th := f.last
	return th.claimSeq, th.releaseSeq != 0
}

func (f *auditFold) IsHolder(h string) bool { return f.last.holder.eq(h) }

func (f *auditFold) ClaimHolder() string { return f.last.holder.String() }

func (f *auditFold) Active() (start, claim uint64, ok bool) {
	th := f.last
	return th.activeStart, th.activeClaim, th.hasActive
}

func (f *auditFold) IsActive(run string) bool {
	th := f.last
	return th.hasActive && th.activeID.eq(run)
}

func (f *auditFold) ActiveID() string { return f.last.activeID.String() }

func (f *auditFold) IsRunHolder(h string) bool {
	th := f.last
	return th.hasActive && th.activeHolder.eq(h)
}

func (f *auditFold) RunHolder() string { return f.last.activeHolder.String() }

func (f *auditFold) LastRun() (string, projections.RunStatus, uint64, bool) {
	th := f.last
	return th.lastRun.String(), runStatuses[th.lastStat], th.lastEnd, th.lastStat != 0
}

func (f *auditFold) MessageOf(seq uint64) projections.MsgInfo {
	th := f.last
	i, ok := th.message(seq)
	switch {
	case !ok && th.ids != nil && th.ids.reposts[seq] != 0:
		return projections.MsgInfo{Status: projections.MsgReposted, By: th.ids.reposts[seq]}
	case !ok:
		return projections.MsgInfo{Status: projections.MsgNotPosted}
	case th.msgs[i].by != 0:
		return projections.MsgInfo{Status: projections.MsgConsumed, By: th.msgs[i].by}
	}
	return projections.MsgInfo{Status: projections.MsgPending, Oldest: i == th.next}
}

func (f *auditFold) RequestOf(id string) (projections.ReqInfo, bool) {
	th := f.last
	q, ok := th.requests[mkShort(id)]
	if !ok || !th.hasActive || q.run != th.activeStart {
		return projections.ReqInfo{}, false
	}
	return projections.ReqInfo{Opened: q.opened, Answered: q.answered != 0, AnswerAt: q.answered}, true
}

func (f *auditFold) Seen(env *events.Envelope, kind events.Kind) {
	th := f.last
	switch kind {
	case events.KindClaim:
		th.lastClaimSubj = env.Seq
	case events.KindRun:
		th.lastRunSubj = env.Seq
	}
}

func (f *auditFold) Post(env *events.Envelope, b *eventspb.MessagePosted) {
	th := f.last
	th.msgs = append(th.msgs, message{seq: env.Seq})
	if id := b.GetMessageId(); id != "" {
		if th.ids == nil {
			th.ids = &idState{first: make(map[short]uint64)}
		}
		th.ids.first[mkShort(id)] = env.Seq
	}
}

// PostedID implements [projections.State].
func (f *auditFold) PostedID(id string) (uint64, bool) {
	th := f.last
	if th.ids == nil {
		return 0, false
	}
	seq, ok := th.ids.first[mkShort(id)]
	return seq, ok
}

// Reposted implements [projections.State].
func (f *auditFold) Reposted(env *events.Envelope, orig uint64) {
	th := f.last
	if th.ids.reposts == nil {
		th.ids.reposts = make(map[uint64]uint64)
	}
	th.ids.reposts[env.Seq] = orig
}

func (f *auditFold) Claimed(env *events.Envelope, holder string, _ *eventspb.ThreadClaimed) {
	th := f.last
	th.claimSeq, th.releaseSeq = env.Seq, 0
	th.holder.set(holder)
}

func (f *auditFold) Released(env *events.Envelope) { f.last.releaseSeq = env.Seq }

func (f *auditFold) Consume(env *events.Envelope, seq uint64, _ projections.ConsumptionKind, _ string) {
	th := f.last
	i, ok := th.message(seq)
	if !ok {
		return
	}
	th.msgs[i].by = env.Seq
	if i != th.next {
		return // out of order: the older messages stay pending
	}
	for i++; i < len(th.msgs) && th.msgs[i].by != 0; i++ {
	}
	th.taken, th.next = th.msgs[i-1].seq, i
}

func (f *auditFold) StartRun(env *events.Envelope, b *eventspb.RunStarted) {
	th := f.last
	th.hasActive, th.activeStart, th.activeClaim = true, env.Seq, env.Event.GetClaimSeq()
	th.activeID.set(b.GetRunId())
	th.activeHolder.set(env.Event.GetHolder())
	th.lastRun, th.lastStat, th.lastEnd = th.activeID, toRunStatus(projections.RunActive), 0
}

func (*auditFold) Output(*events.Envelope, *eventspb.RunOutput) {}

func (f *auditFold) OpenRequest(env *events.Envelope, b *eventspb.RequestOpened) {
	th := f.last
	if th.requests == nil {
		th.requests = make(map[short]request)
	}
	th.requests[mkShort(b.GetRequestId())] = request{run: th.activeStart, opened: env.Seq}
}

func (f *auditFold) Answered(env *events.Envelope, b *eventspb.AnswerGiven) {
	th := f.last
	key := mkShort(b.GetRequestId())
	q := th.requests[key]
	q.answered = env.Seq
	th.requests[key] = q
}

func (*auditFold) Steered(*events.Envelope, *eventspb.SteeringGiven) {}

func (f *auditFold) EndRun(env *events.Envelope, status projections.RunStatus, _, _ string) {
	th := f.last
	th.hasActive, th.lastStat, th.lastEnd = false, toRunStatus(status), env.Seq
	if status == projections.RunAbandoned {
		if th.abandoned == nil {
			th.abandoned = make(map[short]uint64)
		}
		th.abandoned[th.activeID] = env.Seq
	}
}

// Anomaly reports f as the violation of the spec's invariant it breaks, or
// else as an anomaly.
func (f *auditFold) Anomaly(env *events.Envelope, fd projections.Finding) {
	a, th := (*Auditor)(f), f.last
	switch fd.Code {
	case projections.CodeOneActiveRun:
		a.violation(checkI3, th, seqs(th.activeStart, env.Seq), fmt.Sprintf(
			"run %q started at %d while run %q, started at %d, was active", fd.Run, env.Seq, th.activeID.String(), th.activeStart))
		return
	case projections.CodeConsumedAgain:
		if i, ok := th.message(fd.Msg); ok {
			by := th.msgs[i].by
			a.violation(checkI1, th, seqs(fd.Msg, by, env.Seq), fmt.Sprintf(
				"message %d was consumed again by %s at %d; it was first consumed at %d", fd.Msg, env.Type, env.Seq, by))
			return
		}
	case projections.CodeNotOldest:
		a.noneSkipped(th, env, fd.Msg) // skip.go
		return
	case projections.CodeNotPosted, projections.CodeRepostConsumed:
		// Spec: NoneSkipped (RunStart, Reply and Steer consume the oldest
		// pending message): a consuming event that names no pending message
		// consumes none of the log's. A run_interrupted naming one is an
		// anomaly: no model step consumes for it.
		if consumes(env) {
			a.notPending(th, env, fd.Reason) // skip.go
			return
		}
	case projections.CodeRequestReused:
		// Spec: AnswerOnce. The model counts a run's requests, and the log
		// names them: an id opened twice by one run leaves it unsaid which
		// request an answer closes.
		a.violation(checkAnswerOnce, th, seqs(env.Seq), fmt.Sprintf("request_opened at %d: %s", env.Seq, fd.Reason))
		return
	case projections.CodeAbandonClaim, projections.CodeAbandonOwn:
		if a.abandonBroken {
			return // abandonOlder reported it
		}
		a.violation(checkAbandonOnlyOlder, th, seqs(th.activeStart, env.Seq), fmt.Sprintf("run_abandoned at %d: %s", env.Seq, fd.Reason))
		return
	case projections.CodeIDConsumedAgain:
		if i, ok := th.message(fd.Msg); ok {
			by := th.msgs[i].by
			a.violation(checkI1, th, seqs(fd.Msg, by, env.Seq), fmt.Sprintf(
				"message %d was consumed at %d, and again by %s at %d through a repost of its message id", fd.Msg, by, env.Type, env.Seq))
			return
		}
	case projections.CodeAnsweredAgain, projections.CodeNotActive, projections.CodeUnknownRequest:
		// Spec: AnswerOnce, whatever run the answer names: the rules see
		// only the active run's requests.
		if b := env.Event.GetAnswerGiven(); b != nil {
			if q, ok := th.requests[mkShort(b.GetRequestId())]; ok && q.answered != 0 {
				a.violation(checkAnswerOnce, th, seqs(q.opened, q.answered, env.Seq), fmt.Sprintf(
					"request %q was answered again at %d; it was first answered at %d", b.GetRequestId(), env.Seq, q.answered))
				return
			}
		}
		// Spec: GivenToActive.
		switch env.Event.GetBody().(type) {
		case *eventspb.Event_AnswerGiven, *eventspb.Event_SteeringGiven:
			if fd.Code != projections.CodeAnsweredAgain {
				// With no run active, name the end that left none: it may
				// be a forged end of the run the event names.
				at := th.activeStart
				if !th.hasActive {
					at = th.lastEnd
				}
				a.violation(checkGivenToActive, th, seqs(at, env.Seq), fmt.Sprintf("%s at %d: %s", env.Type, env.Seq, fd.Reason))
				return
			}
		}
		if fd.Code != projections.CodeNotActive {
			break
		}
		// Spec: AbandonOnlyOlder (Abandon abandons the active run).
		if env.Event.GetRunAbandoned() != nil {
			a.violation(checkAbandonOnlyOlder, th, seqs(th.activeStart, env.Seq), fmt.Sprintf("run_abandoned at %d: %s", env.Seq, fd.Reason))
			return
		}
		// Spec: NoEndAfterAbandon, for the unfenced events of a run.
		if t := env.Type; t.Kind() == events.KindRun && !t.Fenced() {
			if at, ok := th.abandoned[mkShort(fd.Run)]; ok {
				a.violation(checkNoEndAfterAbandon, th, seqs(at, env.Seq), fmt.Sprintf(
					"%s at %d is of run %q, which was abandoned at %d", env.Type, env.Seq, fd.Run, at))
				return
			}
			// Spec: RunByHolder. No holder writes for a run that is not
			// active: one that never started, or ended (it ends once).
			a.violation(checkRunByHolder, th, seqs(th.lastEnd, env.Seq), fmt.Sprintf("%s at %d: %s", env.Type, env.Seq, fd.Reason))
			return
		}
	case projections.CodeRunHolder:
		a.violation(checkRunByHolder, th, seqs(th.activeStart, env.Seq), fmt.Sprintf("%s at %d: %s", env.Type, env.Seq, fd.Reason))
		return
	case projections.CodeReleaseNotNewest, projections.CodeReleasedAgain, projections.CodeReleaseHolder:
		if a.chainBroken {
			break // ClaimChain reported it
		}
		a.violation(checkReleaseByHolder, th, seqs(th.claimSeq, env.Seq), fmt.Sprintf("thread_released at %d: %s", env.Seq, fd.Reason))
		return
	}
	a.anomalyIgnored(th, env, ignores(fd.Code), fd.Reason)
}

// ignores reports whether the fold applies nothing of an event with a
// finding of code c (projections.Rules): the others are applied in part
// or whole.
func ignores(c projections.Code) bool {
	switch c {
	case projections.CodeMalformed, projections.CodeOtherThread, projections.CodeForkNotFirst,
		projections.CodeForkBody, projections.CodeReposted:
		return true
	}
	return false
}
