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

// strategyEvent follows thread_configured, a stutter by a client; the
// rules check the others (run_interrupted and run_output name the active
// run: RunByHolder).
func (th *threadTrace) strategyEvent(env *events.Envelope) {
	if b := env.Event.GetThreadConfigured(); b != nil {
		if st, err := events.ParseStrategy(b.GetStrategy()); err == nil && st != "" {
			th.strategy.thread = st
		}
	}
}
