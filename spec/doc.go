// Package spec checks artifactr's thread-claim protocol, as stated in
// ThreadClaimLapse.tla, by model checking a Go transcription of it, and
// checks real logs against that model.
//
// TLC cannot be installed on the CI machines, so the same state machine is
// written in Go under the same variable, action, invariant and property
// names, and [Check] explores it breadth first, as TLC does: every
// reachable state, the number of distinct states and of transitions, the
// invariants in every state, the action properties on every transition, and
// the shortest counterexample when one fails. [CheckAll] goes on past
// failures and records every check that fails, for the mutation tests. The
// drift tests hold the .tla, the .cfg files and the Go model to one
// another, and the recorded state and transition counts hold their meaning;
// tlacheck/ checks the .tla's syntax. README.md maps each action to the code
// that performs it, the event it writes and the audit check on real logs.
//
// [CheckLiveness] searches the state graph's strongly connected components
// for a weakly fair cycle in which a bad state predicate holds throughout;
// [EventuallyConsumed] uses it to check that every posted message is
// consumed, on a model whose claim sequences are renumbered so that
// takeovers are unbounded.
//
// [TraceValidator] checks each thread's events, in stream order, with the
// plain audit's rules and maps them to the spec's actions, and reports the
// first event the rules or the model do not allow (artifactr audit
// --spec): one rule set, so it flags the threads the plain audit flags.
//
// # Usage
//
// Check the model of ThreadClaimLapse.cfg and print a counterexample:
//
//	m, err := spec.ThreadClaimLapse(spec.DefaultConfig())
//	if err != nil {
//		return err
//	}
//	res := spec.Check(m)
//	fmt.Println(res.Distinct, "distinct states,", res.Transitions, "transitions, depth", res.Depth)
//	if res.Violated != "" {
//		fmt.Print(res.Violated, " violated:\n", m.FormatTrace(res.Trace))
//	}
//
// To find the shortest counterexample to one invariant or property alone,
// check m.WithInvariants("I3_OneActiveRun"). Any other model is a [Model]:
// its initial states, its named actions, its invariants, its properties and
// a canonical Key.
//
// Validate a log:
//
//	v := spec.NewTraceValidator()
//	for _, env := range envs { // stream order
//		v.Add(env)
//	}
//	for _, n := range v.Report().Nonconforming {
//		fmt.Println(n) // thread, seq, the action, what the spec allowed
//	}
package spec
