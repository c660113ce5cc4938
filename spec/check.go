package spec

import (
	"fmt"
	"strings"
)

// Model is a state machine for [Check]: its initial states, its actions
// (the disjuncts of a TLA+ Next), the invariants to check in every
// reachable state and the action properties to check on every transition. Key maps a state to its canonical form, so that states
// that differ only in ways the model ignores are counted once. Show, if
// set, renders a state for a trace; otherwise it is printed with %v.
type Model[S any, K comparable] struct {
	Init       []S
	Actions    []Action[S]
	Invariants []Invariant[S]
	Properties []Property[S]
	Key        func(S) K
	Show       func(S) string
}

// Action is one named disjunct of Next.
type Action[S any] struct {
	Name string
	// Next returns the action's successors of s, none when it is disabled.
	Next func(s S) []Succ[S]
}

// Succ is a successor state, with the argument the action was taken with
// (the process of \E p \in Procs : A(p)), or "" for an action without one.
type Succ[S any] struct {
	Arg   string
	State S
}

// Invariant is a named state predicate, such as I3_OneActiveRun.
type Invariant[S any] struct {
	Name  string
	Holds func(S) bool
}

// Property is a named action property, [][A]_vars in TLA+: a predicate
// over each transition, given the state before and the step after (the
// action, its argument and the state it led to).
type Property[S any] struct {
	Name  string
	Holds func(from S, to Step[S]) bool
}

// Step is one state of a trace and the action that led to it; the first
// step's Action is "Init".
type Step[S any] struct {
	Action string
	Arg    string
	State  S
}

// Result is what [Check] found.
type Result[S any] struct {
	// Distinct is the number of distinct states explored; with no
	// violation it is every reachable state, as TLC's "distinct states".
	Distinct int
	// Depth is the longest shortest path from an initial state, counted in
	// states (an initial state has depth 1), as TLC's "depth" is.
	Depth int
	// Transitions is the number of successor states generated, every
	// transition of every action from every distinct state (TLC's "states
	// generated" less the initial states).
	Transitions int
	// Violated names the first invariant or property found false, "" when
	// none was.
	Violated string
	// Trace is a shortest behaviour from an initial state to the violation:
	// for a property, its last step is the transition that broke it.
	Trace []Step[S]
	// Failures, filled by [CheckAll] only, maps every invariant and
	// property that fails somewhere in the state space to a shortest trace.
	Failures map[string][]Step[S]
	// Coverage counts the transitions each action made, as TLC's action
	// coverage does: an action that never fires makes an invariant
	// vacuous for it, which a test can catch.
	Coverage map[string]int
}

// ActionNames lists the names of m's actions in order.
func (m Model[S, K]) ActionNames() []string {
	names := make([]string, len(m.Actions))
	for i, a := range m.Actions {
		names[i] = a.Name
	}
	return names
}

// PropertyNames lists the names of m's properties in order.
func (m Model[S, K]) PropertyNames() []string {
	names := make([]string, len(m.Properties))
	for i, p := range m.Properties {
		names[i] = p.Name
	}
	return names
}

// InvariantNames lists the names of m's invariants in order.
func (m Model[S, K]) InvariantNames() []string {
	names := make([]string, len(m.Invariants))
	for i, inv := range m.Invariants {
		names[i] = inv.Name
	}
	return names
}

// WithInvariants returns m checking only the named invariants and
// properties, so a test can find the shortest counterexample to one of them
// alone. It panics on an unknown name, a mistake in the caller.
func (m Model[S, K]) WithInvariants(names ...string) Model[S, K] {
	var keep []Invariant[S]
	var props []Property[S]
	for _, name := range names {
		found := false
		for _, inv := range m.Invariants {
			if inv.Name == name {
				keep = append(keep, inv)
				found = true
			}
		}
		for _, p := range m.Properties {
			if p.Name == name {
				props = append(props, p)
				found = true
			}
		}
		if !found {
			panic(fmt.Sprintf("spec: no invariant or property %q", name))
		}
	}
	m.Invariants, m.Properties = keep, props
	return m
}

// node is a discovered state and the edge that first reached it; BFS
// discovers each state first along a shortest path.
type node[S any] struct {
	state  S
	parent int // index of the predecessor, -1 for an initial state
	action string
	arg    string
	depth  int
}

// Check explores every state reachable from m.Init breadth first, like
// TLC, checks the invariants in each new state and the properties on each
// transition. It stops at the first violation, so the trace it returns is
// a shortest one.
func Check[S any, K comparable](m Model[S, K]) Result[S] {
	return explore(m, false)
}

// CheckAll explores every reachable state whatever fails, and records in
// Failures every invariant and property that fails, each with a shortest
// trace. Violated and Trace are those of the first failure found.
func CheckAll[S any, K comparable](m Model[S, K]) Result[S] {
	return explore(m, true)
}

func explore[S any, K comparable](m Model[S, K], all bool) Result[S] {
	res := Result[S]{Coverage: make(map[string]int)}
	if all {
		res.Failures = make(map[string][]Step[S])
	}
	// fail records a violation and reports whether to go on.
	fail := func(name string, tr func() []Step[S]) bool {
		if res.Violated == "" {
			res.Violated, res.Trace = name, tr()
		}
		if !all {
			return false
		}
		if _, ok := res.Failures[name]; !ok {
			res.Failures[name] = tr()
		}
		return true
	}
	// nodes doubles as the BFS queue: states are appended in the order
	// they are found, and expanded in that order.
	var nodes []node[S]
	seen := make(map[K]struct{})
	add := func(n node[S]) bool {
		k := m.Key(n.state)
		if _, ok := seen[k]; ok {
			return true
		}
		seen[k] = struct{}{}
		nodes = append(nodes, n)
		res.Distinct++
		res.Depth = max(res.Depth, n.depth)
		for _, inv := range m.Invariants {
			if !inv.Holds(n.state) {
				i := len(nodes) - 1
				if !fail(inv.Name, func() []Step[S] { return trace(nodes, i) }) {
					return false
				}
			}
		}
		return true
	}
	for _, s := range m.Init {
		if !add(node[S]{state: s, parent: -1, action: "Init", depth: 1}) {
			return res
		}
	}
	for i := 0; i < len(nodes); i++ {
		from := nodes[i]
		for _, a := range m.Actions {
			for _, succ := range a.Next(from.state) {
				res.Coverage[a.Name]++
				res.Transitions++
				step := Step[S]{Action: a.Name, Arg: succ.Arg, State: succ.State}
				for _, p := range m.Properties {
					if !p.Holds(from.state, step) {
						tr := func() []Step[S] { return append(trace(nodes, i), step) }
						if !fail(p.Name, tr) {
							return res
						}
					}
				}
				n := node[S]{state: succ.State, parent: i, action: a.Name, arg: succ.Arg, depth: from.depth + 1}
				if !add(n) {
					return res
				}
			}
		}
	}
	return res
}

func trace[S any](nodes []node[S], i int) []Step[S] {
	var steps []Step[S]
	for ; i >= 0; i = nodes[i].parent {
		n := nodes[i]
		steps = append(steps, Step[S]{Action: n.action, Arg: n.arg, State: n.state})
	}
	for l, r := 0, len(steps)-1; l < r; l, r = l+1, r-1 {
		steps[l], steps[r] = steps[r], steps[l]
	}
	return steps
}

// FormatTrace renders a trace of m as TLC prints one: each step's number
// and action, then its state.
func (m Model[S, K]) FormatTrace(steps []Step[S]) string {
	var b strings.Builder
	for i, st := range steps {
		fmt.Fprintf(&b, "%d: <%s>\n", i+1, st.Name())
		if m.Show != nil {
			b.WriteString(m.Show(st.State))
		} else {
			fmt.Fprint(&b, st.State)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Name is the step's action with its argument, as in "Claim(p1)".
func (st Step[S]) Name() string {
	if st.Arg == "" {
		return st.Action
	}
	return st.Action + "(" + st.Arg + ")"
}
