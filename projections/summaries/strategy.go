package summaries

import (
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// The double-texting strategies and cancel, as a summary keeps them: the
// thread's strategy and the active run's cancel and interrupt. It keeps no
// message's own strategy (it forgets consumed messages), so the rule on an
// interrupt naming a post whose strategy does not interrupt is not checked
// here.

// HasMessages implements [projections.State].
func (f summaryFold) HasMessages() bool { return f.s.Messages > 0 }

// Strategy implements [projections.State].
func (f summaryFold) Strategy() events.Strategy { return f.s.Strategy }

// MessageStrategy implements [projections.State]: unknown here.
func (summaryFold) MessageStrategy(uint64) (events.Strategy, bool) { return "", false }

// ActiveMarks implements [projections.State].
func (f summaryFold) ActiveMarks() (uint64, uint64) { return f.s.RunCancelSeq, f.s.RunInterruptSeq }

// SetStrategy implements [projections.State].
func (f summaryFold) SetStrategy(_ *events.Envelope, st events.Strategy) { f.s.Strategy = st }

// PostStrategy implements [projections.State]: a summary keeps no message.
func (summaryFold) PostStrategy(*events.Envelope, events.Strategy) {}

// Cancel implements [projections.State].
func (f summaryFold) Cancel(env *events.Envelope) { f.s.RunCancelSeq = env.Seq }

// Interrupt implements [projections.State].
func (f summaryFold) Interrupt(env *events.Envelope, _ *eventspb.RunInterrupted) {
	f.s.RunInterruptSeq = env.Seq
}
