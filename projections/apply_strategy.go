package projections

import (
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"slices"
)

// The fold of the double-texting strategies and cancel (issue 15):
// thread_configured, cancel_requested, run_interrupted and a post's
// strategy. Apply calls these from one case each.

// HasMessages implements [State].
func (t threadFold) HasMessages() bool { return t.NumMessages() > 0 }

// Strategy implements [State].
func (t threadFold) Strategy() events.Strategy { return t.Thread.Strategy }

// MessageStrategy implements [State].
func (t threadFold) MessageStrategy(seq uint64) (events.Strategy, bool) {
	i, ok := t.messageIndex(seq)
	if !ok {
		return "", false
	}
	return t.Messages[i].Strategy, true
}

// ActiveMarks implements [State].
func (t threadFold) ActiveMarks() (uint64, uint64) {
	if r := t.ActiveRun; r != nil {
		return r.CancelSeq, r.InterruptSeq
	}
	return 0, 0
}

// SetStrategy implements [State].
func (t threadFold) SetStrategy(_ *events.Envelope, st events.Strategy) { t.Thread.Strategy = st }

// PostStrategy implements [State].
func (t threadFold) PostStrategy(env *events.Envelope, st events.Strategy) {
	if i, ok := t.messageIndex(env.Seq); ok {
		t.Messages[i].Strategy = st
	}
}

// Cancel implements [State]. A cancel with rollback leaves the run out of
// later histories, as a rollback post does.
func (t threadFold) Cancel(env *events.Envelope) {
	t.ActiveRun.CancelSeq = env.Seq
	if env.Event.GetCancelRequested().GetRollback() {
		t.ActiveRun.RolledBack = true
	}
}

// Interrupt implements [State].
func (t threadFold) Interrupt(env *events.Envelope, b *eventspb.RunInterrupted) {
	r := t.ActiveRun
	r.InterruptSeq, r.InterruptedBy, r.RolledBack = env.Seq, b.GetMessageSeq(), b.GetRollback()
}

// StrategyOf returns the strategy of m: its own, else the thread's, else
// enqueue.
func (t *Thread) StrategyOf(m Message) events.Strategy {
	switch {
	case m.Strategy != "":
		return m.Strategy
	case t.Strategy != "":
		return t.Strategy
	}
	return events.StrategyEnqueue
}

// History returns the messages a run whose prompt is promptSeq is given as
// history: the messages posted before it, less those consumed by a run
// that was rolled back (its prompt, answers and steering).
func (t *Thread) History(promptSeq uint64) []Message {
	var rolled map[string]bool
	for _, r := range t.Runs {
		if r.RolledBack {
			if rolled == nil {
				rolled = make(map[string]bool)
			}
			rolled[r.ID] = true
		}
	}
	var out []Message
	for _, m := range t.Messages {
		if m.Seq >= promptSeq {
			break
		}
		if c := m.Consumed; c != nil && rolled[c.RunID] {
			continue
		}
		out = append(out, m)
	}
	return out
}

// HistoryTail returns the newest n messages of [Thread.History](promptSeq),
// oldest first, reading only those and the runs (n <= 0: all of them).
func (t *Thread) HistoryTail(promptSeq uint64, n int) []Message {
	if n <= 0 {
		return t.History(promptSeq)
	}
	var rolled map[string]bool
	for _, r := range t.Runs {
		if r.RolledBack {
			if rolled == nil {
				rolled = make(map[string]bool)
			}
			rolled[r.ID] = true
		}
	}
	i, _ := slices.BinarySearchFunc(t.Messages, promptSeq, cmpSeq)
	var out []Message
	for i--; i >= 0 && len(out) < n; i-- {
		m := t.Messages[i]
		if c := m.Consumed; c != nil && rolled[c.RunID] {
			continue
		}
		out = append(out, m)
	}
	slices.Reverse(out)
	return out
}

// RolledBack reports whether run id was rolled back.
func (t *Thread) RolledBack(id string) bool {
	for _, r := range t.Runs {
		if r.ID == id && r.RolledBack {
			return true
		}
	}
	return false
}
