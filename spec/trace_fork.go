package spec

// forked validates thread_forked, which the spec has no action for: it
// copies another thread's history as consumed messages and ended runs
// (projections.Fork), so in the model it is a stutter from the initial
// state: nothing posted, no claim, no run. It must be the thread's first
// event; a copied message then is not pending, and a run_started or answer
// naming one does not conform.
func (v *TraceValidator) forked(th *threadTrace) *Nonconformance {
	init := v.mt.Init()
	if th.forked || len(th.frontier) != 1 || th.frontier[0] != init || th.newest != 0 ||
		len(th.holders) != 0 || len(th.retired) != 0 || len(th.pending) != 0 {
		return bad("is not the thread's first event; a fork starts a thread")
	}
	th.forked = true
	return nil
}
