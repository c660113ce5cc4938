package spec

import (
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
)

// forked validates thread_forked, which the spec has no action for: it
// starts a thread with another thread's history as consumed messages and
// ended runs (projections.Fork), so in the model it is a stutter from the
// initial state: nothing posted, no claim, no run. It must be the thread's
// first event; a message of its history then is not pending, and a
// run_started or answer naming one does not conform.
//
// Both forms are such a stutter: the copied form carries the history, and
// a fork by reference names it. A fork by reference must name one (the
// fold's rule, projections.ForkBodyError: an earlier event of another
// thread, and no copy besides); when the audit resolved it (env.Fork), the
// source sequence must be one of the source's events. Its history's
// messages need no table here: they are never pending, whatever they are.
func (v *TraceValidator) forked(th *threadTrace, env *events.Envelope) *Nonconformance {
	init := v.mt.Init()
	if th.forked || len(th.frontier) != 1 || th.frontier[0] != init || th.newest != 0 ||
		len(th.holders) != 0 || len(th.retired) != 0 || len(th.pending) != 0 {
		return bad("is not the thread's first event; a fork starts a thread")
	}
	if b := env.Event.GetThreadForked(); b.GetReference() {
		if reason := projections.ForkBodyError(th.id, env.Seq, b); reason != "" {
			return bad("is a fork by reference no client writes: %s", reason)
		}
		if h := env.Fork; h != nil && h.Bad != "" {
			return bad("names no history: %s", h.Bad)
		}
	}
	th.forked = true
	return nil
}
