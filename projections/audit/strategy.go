package audit

import (
	"fmt"

	"artifactr/events"
	"artifactr/events/eventspb"
)

// The audit of the double-texting strategies and cancel (issue 15).

// strategyState is what the strategy checks keep of a thread.
type strategyState struct {
	thread events.Strategy // configured, or set by the first post
	posted bool            // a message was posted
}

// postStrategy checks a post against its strategy. Spec: RejectOnlyIdle.
func (a *Auditor) postStrategy(th *thread, env *events.Envelope, b *eventspb.MessagePosted) {
	st, err := events.ParseStrategy(b.GetStrategy())
	if err != nil {
		a.anomaly(th, env, fmt.Sprintf("post names unknown strategy %q; it counts as the thread's", b.GetStrategy()))
		st = ""
	}
	if !th.strat.posted && th.strat.thread == "" {
		th.strat.thread = st
	}
	th.strat.posted = true
	if st == "" {
		st = th.strat.thread
	}
	a.checked[checkRejectOnlyIdle]++ // every post is examined for it
	if st == events.StrategyReject && th.hasActive {
		a.violation(checkRejectOnlyIdle, th, seqs(th.activeStart, env.Seq), fmt.Sprintf(
			"post at %d has strategy reject, but run %q, started at %d, was active (the post expected sequence %d on %s)",
			env.Seq, th.activeID.String(), th.activeStart, env.ExpectSeq, orOwn(env.ExpectSubject)))
	}
}

// strategyEvent audits thread_configured, cancel_requested and
// run_interrupted. prevRunSubj is the run subject's last sequence before
// env.
func (a *Auditor) strategyEvent(th *thread, env *events.Envelope, prevRunSubj uint64) {
	switch b := env.Event.GetBody().(type) {
	case *eventspb.Event_ThreadConfigured:
		st, err := events.ParseStrategy(b.ThreadConfigured.GetStrategy())
		if err != nil || st == "" {
			a.anomaly(th, env, fmt.Sprintf("thread_configured with unknown strategy %q", b.ThreadConfigured.GetStrategy()))
			return
		}
		th.strat.thread = st
	case *eventspb.Event_CancelRequested:
		// A client's request; it names a run that may have ended since.
	case *eventspb.Event_RunInterrupted:
		// Written by the run's holder as run_output is: a compare-and-set
		// on the run subject, naming the active run.
		a.runChain(th, env, prevRunSubj)
		a.runEvent(th, env, b.RunInterrupted.GetRunId())
	}
}
