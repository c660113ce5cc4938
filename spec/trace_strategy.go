package spec

import (
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// Trace validation of the double-texting strategies and cancel (issue 15).

// traceStrategy is the thread's strategy as the validator follows it.
type traceStrategy struct {
	thread events.Strategy
	posted bool
}

// postStrategy returns the strategy of a post, its own or the thread's, and
// records the thread's first post's.
func (th *threadTrace) postStrategy(m *eventspb.MessagePosted) events.Strategy {
	st, err := events.ParseStrategy(m.GetStrategy())
	if err != nil {
		st = "" // the fold counts it as the thread's
	}
	if !th.strategy.posted && th.strategy.thread == "" {
		th.strategy.thread = st
	}
	th.strategy.posted = true
	if st == "" {
		st = th.strategy.thread
	}
	return st
}

// strategyEvent validates thread_configured and cancel_requested, stutters
// by clients, and run_interrupted, a stutter by the holder that, as
// run_output, must name the active run.
func (th *threadTrace) strategyEvent(env *events.Envelope) *Nonconformance {
	switch b := env.Event.GetBody().(type) {
	case *eventspb.Event_ThreadConfigured:
		if st, err := events.ParseStrategy(b.ThreadConfigured.GetStrategy()); err == nil && st != "" {
			th.strategy.thread = st
		}
	case *eventspb.Event_RunInterrupted:
		if i, ok := th.runIdx[b.RunInterrupted.GetRunId()]; !ok || th.frontier[0].runs[i] != active {
			return bad("names run %q, which is not active", b.RunInterrupted.GetRunId())
		}
	}
	return nil
}
