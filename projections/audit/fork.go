package audit

import (
	"fmt"
	"hash/maphash"

	"artifactr/events"
	"artifactr/events/eventspb"
)

// forked audits thread_forked, which copies another thread's history as
// the thread's first event (projections.Fork has the semantics). Every
// copied message counts as consumed by the fork, so a later consuming event
// naming one breaks I1. A fork that is not the thread's first event, was
// appended without its compare-and-set, or copies a message its source did
// not post (when the source is in the audited log) is an anomaly, and a
// misplaced fork changes nothing.
func (a *Auditor) forked(th *thread, env *events.Envelope, b *eventspb.ThreadForked) {
	if len(th.msgs) > 0 || th.claimSeq != 0 || th.lastClaimSubj != 0 || th.lastRunSubj != 0 || th.hasActive {
		a.anomaly(th, env, fmt.Sprintf("thread_forked at %d is not the thread's first event", env.Seq))
		return
	}
	if env.ExpectSeq != 0 || (env.ExpectSubject != "" && env.ExpectSubject != env.Subject) {
		a.anomaly(th, env, fmt.Sprintf("thread_forked at %d expected sequence %d on %s, not an empty posted subject",
			env.Seq, env.ExpectSeq, orOwn(env.ExpectSubject)))
	}
	src := a.lookup(b.GetSourceThread())
	var prev uint64
	for _, m := range b.GetMessages() {
		seq := m.GetSeq()
		if seq <= prev || seq > b.GetSourceSeq() || seq >= env.Seq {
			a.anomaly(th, env, fmt.Sprintf("thread_forked copies message %d out of order or past its source seq %d", seq, b.GetSourceSeq()))
			th.msgs = th.msgs[:0]
			return
		}
		prev = seq
		if src != nil && seq >= a.firstSeq { // an audit from a later seq did not see it
			if _, ok := src.message(seq); !ok {
				a.anomaly(th, env, fmt.Sprintf("thread_forked copies message %d, which %s did not post", seq, b.GetSourceThread()))
			}
		}
		th.msgs = append(th.msgs, message{seq: seq, by: env.Seq})
	}
	if n := len(th.msgs); n > 0 {
		th.taken, th.next = th.msgs[n-1].seq, n
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
