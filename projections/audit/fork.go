package audit

import (
	"fmt"
	"hash/maphash"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections"
)

// Fresh implements [projections.State].
func (f *auditFold) Fresh() bool {
	th := f.last
	return !th.forked && len(th.msgs) == 0 && th.claimSeq == 0 && th.lastClaimSubj == 0 &&
		th.lastRunSubj == 0 && !th.hasActive && th.lastStat == 0
}

// Forked implements [projections.State]: every copied message counts as
// consumed by the fork, so a later consuming event naming one breaks I1;
// the newest copied run is the thread's last, ended (abandoned if it was
// active in the source).
func (f *auditFold) Forked(env *events.Envelope, b *eventspb.ThreadForked) {
	th := f.last
	th.forked = true
	for _, m := range b.GetMessages() {
		th.msgs = append(th.msgs, message{seq: m.GetSeq(), by: env.Seq})
	}
	if n := len(th.msgs); n > 0 {
		th.taken, th.next = th.msgs[n-1].seq, n
	}
	if rs := b.GetRuns(); len(rs) > 0 {
		last := rs[len(rs)-1]
		st := projections.RunStatus(last.GetStatus())
		if st == projections.RunActive {
			st = projections.RunAbandoned
		}
		th.lastRun.set(last.GetRunId())
		th.lastStat, th.lastEnd = toRunStatus(st), env.Seq
	}
}

// forkAppend is the audit's own check of how a thread_forked was appended:
// expecting the posted subject empty, and copying messages its source
// posted (when the source is in the audited log). A fork by reference
// copies none: its history is read from the source's log, so it is the
// source's by construction.
func (a *Auditor) forkAppend(th *thread, env *events.Envelope) {
	if env.ExpectSeq != 0 || (env.ExpectSubject != "" && env.ExpectSubject != env.Subject) {
		a.anomaly(th, env, fmt.Sprintf("thread_forked at %d expected sequence %d on %s, not an empty posted subject",
			env.Seq, env.ExpectSeq, orOwn(env.ExpectSubject)))
	}
	b := env.Event.GetThreadForked()
	if b.GetReference() && env.Fork == nil {
		// The fold has no history to check the fork's runs against: say
		// so, rather than pass what was not checked (resolve with
		// projections.ResolveFork before Add).
		a.anomaly(th, env, fmt.Sprintf("thread_forked at %d names %s up to %d, which this audit did not read: the history is not checked",
			env.Seq, b.GetSourceThread(), b.GetSourceSeq()))
	}
	src := a.lookup(b.GetSourceThread())
	if src == nil || src == th {
		return
	}
	for _, m := range b.GetMessages() {
		seq := m.GetSeq()
		if seq >= a.firstSeq { // an audit from a later seq did not see it
			if _, ok := src.message(seq); !ok {
				a.anomaly(th, env, fmt.Sprintf("thread_forked copies message %d, which %s did not post", seq, b.GetSourceThread()))
				return
			}
		}
	}
}

// lookup returns id's state if the audit has seen the thread, else nil.
func (a *Auditor) lookup(id string) *thread {
	for th := a.threads[maphash.String(a.seed, id)]; th != nil; th = th.collide {
		if th.key.eq(id) {
			return th
		}
	}
	return nil
}
