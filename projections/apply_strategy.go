package projections

import (
	"artifactr/events"
	"artifactr/events/eventspb"
)

// The fold of the double-texting strategies and cancel (issue 15):
// thread_configured, cancel_requested, run_interrupted and a post's
// strategy. Apply calls these from one case each.

// applyStrategy folds thread_configured, cancel_requested and
// run_interrupted. None consumes a message.
func (t *Thread) applyStrategy(env *events.Envelope) {
	switch b := env.Event.GetBody().(type) {
	case *eventspb.Event_ThreadConfigured:
		st, err := events.ParseStrategy(b.ThreadConfigured.GetStrategy())
		if err != nil || st == "" {
			t.anomalyf(env, "thread_configured with unknown strategy %q; the thread keeps %q", b.ThreadConfigured.GetStrategy(), t.Strategy)
			return
		}
		t.Strategy = st
	case *eventspb.Event_CancelRequested:
		t.cancelRequested(env, b.CancelRequested)
	case *eventspb.Event_RunInterrupted:
		t.interrupted(env, b.RunInterrupted)
	}
}

// postStrategy records a post's strategy. The thread's first post sets the
// thread's strategy when it names one and none was configured. An unknown
// strategy is an anomaly and counts as none: the post is a message anyway.
func (t *Thread) postStrategy(b *eventspb.MessagePosted) {
	st, err := events.ParseStrategy(b.GetStrategy())
	m := &t.Messages[len(t.Messages)-1]
	if err != nil {
		t.Anomalies = append(t.Anomalies, Anomaly{Seq: m.Seq, Type: events.TypeMessagePosted,
			Reason: "post names unknown strategy " + b.GetStrategy() + "; it counts as the thread's"})
		return
	}
	m.Strategy = st
	if len(t.Messages) == 1 && t.Strategy == "" {
		t.Strategy = st
	}
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

// cancelRequested marks the run it names (or the active run) cancelled when
// it is active. A request for a run that is not active is a race a client
// may lose (the run ended first), not an anomaly: it changes nothing.
func (t *Thread) cancelRequested(env *events.Envelope, b *eventspb.CancelRequested) {
	r := t.ActiveRun
	if r == nil || (b.GetRunId() != "" && b.GetRunId() != r.ID) || r.CancelSeq != 0 {
		return
	}
	r.CancelSeq = env.Seq
}

// interrupted marks the active run interrupted by a post.
func (t *Thread) interrupted(env *events.Envelope, b *eventspb.RunInterrupted) {
	r := t.activeRun(env, b.GetRunId())
	if r == nil {
		return
	}
	if r.InterruptSeq != 0 {
		t.anomalyf(env, "run %q was already interrupted at %d", r.ID, r.InterruptSeq)
		return
	}
	i, ok := t.messageIndex(b.GetMessageSeq())
	if !ok {
		t.anomalyf(env, "run_interrupted names message %d, which was not posted in this thread", b.GetMessageSeq())
	} else if !t.StrategyOf(t.Messages[i]).Interrupts() {
		t.anomalyf(env, "run_interrupted names message %d, whose strategy %s does not interrupt", b.GetMessageSeq(), t.StrategyOf(t.Messages[i]))
	}
	r.InterruptSeq, r.InterruptedBy, r.RolledBack = env.Seq, b.GetMessageSeq(), b.GetRollback()
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

// RolledBack reports whether run id was rolled back.
func (t *Thread) RolledBack(id string) bool {
	for _, r := range t.Runs {
		if r.ID == id && r.RolledBack {
			return true
		}
	}
	return false
}
