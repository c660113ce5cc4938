package spec

import (
	"slices"
	"strings"
	"testing"
)

// counter is a toy model whose numbers are known by hand, so the checker
// itself can fail: x counts up to top by Inc, Jump leaps from 0 to 5, and
// Reset goes back to 0.
func counter(top int, jump bool, invariants ...Invariant[int]) Model[int, int] {
	step := func(name string, guard func(int) bool, next func(int) int) Action[int] {
		return Action[int]{Name: name, Next: func(x int) []Succ[int] {
			if !guard(x) {
				return nil
			}
			return []Succ[int]{{State: next(x)}}
		}}
	}
	m := Model[int, int]{
		Init: []int{0},
		// Inc comes first, so a checker that took the first action's path
		// instead of the shortest one would be caught.
		Actions: []Action[int]{
			step("Inc", func(x int) bool { return x < top }, func(x int) int { return x + 1 }),
			step("Reset", func(x int) bool { return x > 0 }, func(int) int { return 0 }),
		},
		Invariants: invariants,
		Key:        func(x int) int { return x },
	}
	if jump {
		m.Actions = append(m.Actions, step("Jump", func(x int) bool { return x == 0 }, func(int) int { return 5 }))
	}
	return m
}

func not(name string, bad int) Invariant[int] {
	return Invariant[int]{Name: name, Holds: func(x int) bool { return x != bad }}
}

func actions[S any](t *testing.T, trace []Step[S]) []string {
	t.Helper()
	names := make([]string, len(trace))
	for i, st := range trace {
		names[i] = st.Name()
	}
	return names
}

func TestCheck_counter_exploresEveryState(t *testing.T) {
	res := Check(counter(9, false))
	if res.Violated != "" {
		t.Fatalf("Violated = %q, want none", res.Violated)
	}
	// 0..9 are ten states; 9 is reached after nine Incs, the tenth state
	// of the path, as TLC counts depth.
	if res.Distinct != 10 || res.Depth != 10 {
		t.Errorf("Distinct, Depth = %d, %d; want 10, 10", res.Distinct, res.Depth)
	}
	if res.Coverage["Inc"] != 9 || res.Coverage["Reset"] != 9 {
		t.Errorf("Coverage = %v, want Inc and Reset 9 each", res.Coverage)
	}
}

func TestCheck_invariant_shortestCounterexample(t *testing.T) {
	res := Check(counter(9, true, not("NotSeven", 7)))
	if res.Violated != "NotSeven" {
		t.Fatalf("Violated = %q, want NotSeven", res.Violated)
	}
	want := []string{"Init", "Jump", "Inc", "Inc"}
	if got := actions(t, res.Trace); !slices.Equal(got, want) {
		t.Errorf("trace = %v, want %v (the shortest, not Inc seven times)", got, want)
	}
	if last := res.Trace[len(res.Trace)-1].State; last != 7 {
		t.Errorf("last state = %d, want 7", last)
	}
}

func TestCheck_invariant_firstInOrderReported(t *testing.T) {
	// 3 is reached before 4, whatever the order of the invariants.
	res := Check(counter(9, false, not("NotFour", 4), not("NotThree", 3)))
	if res.Violated != "NotThree" || len(res.Trace) != 4 {
		t.Errorf("Violated = %q at depth %d, want NotThree at 4", res.Violated, len(res.Trace))
	}
}

func TestCheck_init_violationHasOneStep(t *testing.T) {
	res := Check(counter(9, false, not("NotZero", 0)))
	if res.Violated != "NotZero" || len(res.Trace) != 1 || res.Trace[0].Action != "Init" {
		t.Errorf("Violated = %q, trace = %v; want NotZero at Init", res.Violated, actions(t, res.Trace))
	}
}

func TestCheck_key_mergesEquivalentStates(t *testing.T) {
	m := counter(19, false)
	m.Key = func(x int) int { return x % 10 }
	// 10 has the key of 0, so exploration stops at 9.
	if res := Check(m); res.Distinct != 10 {
		t.Errorf("Distinct = %d, want 10", res.Distinct)
	}
}

func TestCheck_init_manyStates(t *testing.T) {
	m := counter(3, false)
	m.Init = []int{0, 2, 2}
	res := Check(m)
	// The duplicate initial state counts once; 3 is one step from 2.
	if res.Distinct != 4 || res.Depth != 2 {
		t.Errorf("Distinct, Depth = %d, %d; want 4, 2", res.Distinct, res.Depth)
	}
}

func TestModel_WithInvariants_selects(t *testing.T) {
	m := counter(9, false, not("NotThree", 3), not("NotFive", 5)).WithInvariants("NotFive")
	if got := m.InvariantNames(); !slices.Equal(got, []string{"NotFive"}) {
		t.Fatalf("InvariantNames = %v, want [NotFive]", got)
	}
	if res := Check(m); res.Violated != "NotFive" {
		t.Errorf("Violated = %q, want NotFive", res.Violated)
	}
}

func TestModel_WithInvariants_unknownPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("WithInvariants(\"Nope\") did not panic")
		}
	}()
	counter(9, false).WithInvariants("Nope")
}

func TestModel_FormatTrace_namesStepsAndArgs(t *testing.T) {
	m := counter(9, false)
	m.Show = func(x int) string { return "/\\ x = " + strings.Repeat("I", x) }
	got := m.FormatTrace([]Step[int]{{Action: "Init", State: 0}, {Action: "Inc", Arg: "p1", State: 2}})
	want := "1: <Init>\n/\\ x = \n2: <Inc(p1)>\n/\\ x = II\n"
	if got != want {
		t.Errorf("FormatTrace =\n%s\nwant\n%s", got, want)
	}
}

// noStep is an action property: action never goes from `from`.
func noStep(name, action string, from int) Property[int] {
	return Property[int]{Name: name, Holds: func(x int, to Step[int]) bool { return !(to.Action == action && x == from) }}
}

func TestCheck_property_traceEndsWithTheTransition(t *testing.T) {
	m := counter(9, true)
	// Reset from 2 reaches 0, a state already seen: a property is checked
	// on every transition, not only those that find a new state.
	m.Properties = []Property[int]{noStep("NoResetFromTwo", "Reset", 2)}
	res := Check(m)
	if res.Violated != "NoResetFromTwo" {
		t.Fatalf("Violated = %q, want NoResetFromTwo", res.Violated)
	}
	want := []string{"Init", "Inc", "Inc", "Reset"}
	if got := actions(t, res.Trace); !slices.Equal(got, want) {
		t.Errorf("trace = %v, want %v", got, want)
	}
}

func TestCheck_transitions_counted(t *testing.T) {
	// 0..3: Inc from 0, 1, 2 and Reset from 1, 2, 3.
	if res := Check(counter(3, false)); res.Transitions != 6 {
		t.Errorf("Transitions = %d, want 6", res.Transitions)
	}
}

func TestCheckAll_recordsEveryFailure(t *testing.T) {
	m := counter(9, false, not("NotThree", 3), not("NotEight", 8))
	m.Properties = []Property[int]{noStep("NoResetFromFive", "Reset", 5)}
	res := CheckAll(m)
	if res.Distinct != 10 {
		t.Errorf("Distinct = %d, want 10: CheckAll explores everything", res.Distinct)
	}
	for name, n := range map[string]int{"NotThree": 4, "NotEight": 9, "NoResetFromFive": 7} {
		if tr, ok := res.Failures[name]; !ok || len(tr) != n {
			t.Errorf("Failures[%s] = %v, want a trace of %d steps", name, actions(t, tr), n)
		}
	}
	if res.Violated != "NotThree" {
		t.Errorf("Violated = %q, want the first found, NotThree", res.Violated)
	}
}

// flipper is a toy for CheckLiveness: Flip toggles x between 0 and 1,
// Done leaves for 2 (from 0 only, unless both), and Env goes 1 -> 0.
func flipper(doneFromBoth bool) Model[int, int] {
	act := func(name string, next func(int) (int, bool)) Action[int] {
		return Action[int]{Name: name, Next: func(x int) []Succ[int] {
			if y, ok := next(x); ok {
				return []Succ[int]{{State: y}}
			}
			return nil
		}}
	}
	return Model[int, int]{
		Init: []int{0},
		Actions: []Action[int]{
			act("Flip", func(x int) (int, bool) { return 1 - x, x < 2 }),
			act("Done", func(x int) (int, bool) { return 2, x == 0 || doneFromBoth && x == 1 }),
			act("Env", func(x int) (int, bool) { return 0, x == 1 }),
		},
		Key: func(x int) int { return x },
	}
}

func TestCheckLiveness_weakFairness(t *testing.T) {
	bad := func(x int) bool { return x < 2 }
	never := func(string, string) bool { return false }
	fair := func(a, _ string) bool { return a == "Done" }
	for _, tc := range []struct {
		name     string
		both     bool
		fair     func(string, string) bool
		finite   func(string, string) bool
		violated bool
	}{
		// Done is disabled at 1, so a cycle through 1 is fair under WF.
		{"WF, disabled at times", false, fair, never, true},
		// Done enabled throughout the cycle and never taken in it: unfair.
		{"WF, always enabled", true, fair, never, false},
		{"no fairness", true, never, never, true},
		// Flip and Env finitely often: the behaviour stutters at 0 or 1,
		// where Done is enabled.
		{"finite cycle actions", true, fair, func(a, _ string) bool { return a != "Done" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := CheckLiveness(flipper(tc.both), Liveness[int]{Fair: tc.fair, Finite: tc.finite, Bad: bad})
			if res.Violated != tc.violated || res.Distinct != 3 {
				t.Errorf("Violated = %v (cycle %v), Distinct = %d; want %v, 3", res.Violated, res.Cycle, res.Distinct, tc.violated)
			}
		})
	}
}

// A state with no successor is a fair stutter: Bad there is a violation,
// and the prefix leads to it.
func TestCheckLiveness_deadlockIsAViolation(t *testing.T) {
	m := counter(3, false)
	m.Actions = m.Actions[:1] // Inc only: 3 is a dead end
	res := CheckLiveness(m, Liveness[int]{
		Fair:   func(string, string) bool { return true },
		Finite: func(string, string) bool { return false },
		Bad:    func(x int) bool { return x == 3 },
	})
	if got := actions(t, res.Prefix); !res.Violated || res.CycleStates != 1 || len(got) != 4 {
		t.Errorf("Violated = %v, %d states, prefix %v; want the dead end after three Incs", res.Violated, res.CycleStates, got)
	}
}
