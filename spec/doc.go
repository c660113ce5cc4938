// Package spec checks artifactr's thread-claim protocol, as stated in
// ThreadClaimLapse.tla, by model checking a Go transcription of it.
//
// TLC cannot be installed on the CI machines, so the same state machine is
// written in Go under the same variable, action and invariant names, and
// [Check] explores it breadth first, as TLC does: every reachable state,
// the number of distinct states, and the shortest counterexample when an
// invariant fails. The drift tests hold the .tla, the .cfg files and the Go
// model to one another; tlacheck/ checks the .tla's syntax. README.md maps
// each action to the code that performs it and the audit check that
// verifies it on real logs.
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
//	fmt.Println(res.Distinct, "distinct states, depth", res.Depth)
//	if res.Violated != "" {
//		fmt.Print(res.Violated, " violated:\n", m.FormatTrace(res.Trace))
//	}
//
// To find the shortest counterexample to one invariant alone, check
// m.WithInvariants("I3_OneActiveRun"). Any other model is a [Model]: its
// initial states, its named actions, its invariants and a canonical Key.
package spec
