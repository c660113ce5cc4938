package audit

import (
	"fmt"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// The double-texting strategies and cancel: what the audit keeps of them
// for the fold rules, and its check of RejectOnlyIdle.

// strategyState is what the audit keeps of a thread's strategies.
type strategyState struct {
	thread    events.Strategy // configured, or set by the first post
	cancel    uint64          // the active run's first cancel request
	interrupt uint64          // the active run's run_interrupted
	runStart  uint64          // the run those belong to
}

// rejectOnlyIdle checks a post against its strategy, before the rules
// apply it: a reject post must land only while no run is active. Spec:
// RejectOnlyIdle.
func (a *Auditor) rejectOnlyIdle(th *thread, env *events.Envelope) {
	a.checked[checkRejectOnlyIdle]++ // every post is examined for it
	st, err := events.ParseStrategy(env.Event.GetMessagePosted().GetStrategy())
	if err != nil {
		return // the rules report it; it counts as the thread's
	}
	if st == "" {
		st = th.strat.thread
	}
	if st == events.StrategyReject && th.hasActive {
		a.violation(checkRejectOnlyIdle, th, seqs(th.activeStart, env.Seq), fmt.Sprintf(
			"post at %d has strategy reject, but run %q, started at %d, was active (the post expected sequence %d on %s)",
			env.Seq, th.activeID.String(), th.activeStart, env.ExpectSeq, orOwn(env.ExpectSubject)))
	}
}

// HasMessages implements [projections.State].
func (f *auditFold) HasMessages() bool { return len(f.last.msgs) > 0 }

// Strategy implements [projections.State].
func (f *auditFold) Strategy() events.Strategy { return f.last.strat.thread }

// MessageStrategy implements [projections.State]: the audit keeps no
// message's strategy.
func (f *auditFold) MessageStrategy(uint64) (events.Strategy, bool) { return "", false }

// ActiveMarks implements [projections.State].
func (f *auditFold) ActiveMarks() (uint64, uint64) {
	th := f.last
	if !th.hasActive || th.strat.runStart != th.activeStart {
		return 0, 0
	}
	return th.strat.cancel, th.strat.interrupt
}

// SetStrategy implements [projections.State].
func (f *auditFold) SetStrategy(_ *events.Envelope, st events.Strategy) { f.last.strat.thread = st }

// PostStrategy implements [projections.State].
func (f *auditFold) PostStrategy(*events.Envelope, events.Strategy) {}

// Cancel implements [projections.State].
func (f *auditFold) Cancel(env *events.Envelope) { f.mark(env.Seq, 0) }

// Interrupt implements [projections.State].
func (f *auditFold) Interrupt(env *events.Envelope, _ *eventspb.RunInterrupted) { f.mark(0, env.Seq) }

func (f *auditFold) mark(cancel, interrupt uint64) {
	th := f.last
	if th.strat.runStart != th.activeStart {
		th.strat.runStart, th.strat.cancel, th.strat.interrupt = th.activeStart, 0, 0
	}
	if cancel != 0 {
		th.strat.cancel = cancel
	}
	if interrupt != 0 {
		th.strat.interrupt = interrupt
	}
}
