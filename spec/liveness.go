package spec

import "slices"

// Liveness is a property <>[]~Bad's negation to search for: a fair
// behaviour that stays in Bad states forever. Fairness is weak fairness,
// WF_vars(A), of each action instance (an action and its argument) that
// Fair names; actions that Finite names happen only finitely often (the
// environment's), so no cycle may take them.
type Liveness[S any] struct {
	Fair   func(action, arg string) bool
	Finite func(action, arg string) bool
	Bad    func(S) bool
}

// LiveResult is what [CheckLiveness] found.
type LiveResult[S any] struct {
	Distinct, Transitions int
	// SCCs counts the strongly connected components of the Bad states
	// (over the edges a cycle may take) that were examined.
	SCCs int
	// Violated reports a fair cycle of Bad states; Prefix is a shortest
	// behaviour to its first state, and Cycle names the steps inside it.
	Violated bool
	Prefix   []Step[S]
	Cycle    []string
	// CycleStates is the number of states of the fair component.
	CycleStates int
}

// CheckLiveness builds m's state graph and looks for a fair cycle, or a
// state where the behaviour may stutter fairly, in which l.Bad holds
// throughout. Under weak fairness a strongly connected component C of Bad
// states is the set of states visited forever by a fair behaviour iff each
// fair action instance is taken on an edge inside C or is disabled in some
// state of C (stuttering steps are not steps of <<A>>_vars), so no nested
// search is needed.
func CheckLiveness[S any, K comparable](m Model[S, K], l Liveness[S]) LiveResult[S] {
	type edge struct {
		to   int32
		inst int16 // fair instance index, -1 if none
		fin  bool
		act  int16
		arg  string
	}
	var res LiveResult[S]
	insts := map[[2]string]int{}
	var instNames []string
	inst := func(a, arg string) int {
		if !l.Fair(a, arg) {
			return -1
		}
		k := [2]string{a, arg}
		i, ok := insts[k]
		if !ok {
			i = len(instNames)
			insts[k] = i
			instNames = append(instNames, Step[S]{Action: a, Arg: arg}.Name())
		}
		return i
	}
	index := map[K]int32{}
	var nodes []node[S]
	var adj [][]edge
	var enabled [][]uint64 // fair instances enabled (not stuttering) per state
	add := func(n node[S]) int32 {
		k := m.Key(n.state)
		if i, ok := index[k]; ok {
			return i
		}
		i := int32(len(nodes))
		index[k] = i
		nodes = append(nodes, n)
		adj = append(adj, nil)
		enabled = append(enabled, nil)
		return i
	}
	for _, s := range m.Init {
		add(node[S]{state: s, parent: -1, action: "Init", depth: 1})
	}
	for i := 0; i < len(nodes); i++ {
		from := nodes[i]
		for ai, a := range m.Actions {
			for _, succ := range a.Next(from.state) {
				res.Transitions++
				j := add(node[S]{state: succ.State, parent: i, action: a.Name, arg: succ.Arg, depth: from.depth + 1})
				if int(j) == i {
					continue // a stutter: no step of <<A>>_vars
				}
				e := edge{to: j, inst: int16(inst(a.Name, succ.Arg)), fin: l.Finite(a.Name, succ.Arg), act: int16(ai), arg: succ.Arg}
				adj[i] = append(adj[i], e)
				if e.inst >= 0 {
					setBit(&enabled[i], int(e.inst))
				}
			}
		}
	}
	res.Distinct = len(nodes)
	bad := make([]bool, len(nodes))
	for i, n := range nodes {
		bad[i] = l.Bad(n.state)
	}
	// Tarjan's algorithm, iterative, over Bad states and the edges a cycle
	// may take.
	n := len(nodes)
	idx, low := make([]int32, n), make([]int32, n)
	for i := range idx {
		idx[i] = -1
	}
	onStack := make([]bool, n)
	var stack []int32
	var counter int32
	type frame struct {
		v    int32
		next int
	}
	usable := func(e edge) bool { return !e.fin && bad[e.to] }
	for root := range n {
		if !bad[root] || idx[root] >= 0 {
			continue
		}
		call := []frame{{v: int32(root)}}
		idx[root], low[root] = counter, counter
		counter++
		stack = append(stack, int32(root))
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			v := f.v
			if f.next < len(adj[v]) {
				e := adj[v][f.next]
				f.next++
				if !usable(e) {
					continue
				}
				w := e.to
				if idx[w] < 0 {
					idx[w], low[w] = counter, counter
					counter++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{v: w})
				} else if onStack[w] {
					low[v] = min(low[v], idx[w])
				}
				continue
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				u := call[len(call)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] != idx[v] {
				continue
			}
			var comp []int32
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			res.SCCs++
			if res.Violated {
				continue
			}
			in := make(map[int32]bool, len(comp))
			for _, w := range comp {
				in[w] = true
			}
			var always, taken []uint64
			for k, w := range comp {
				if k == 0 {
					always = slices.Clone(enabled[w])
				} else {
					andBits(&always, enabled[w])
				}
				for _, e := range adj[w] {
					if usable(e) && in[e.to] && e.inst >= 0 {
						setBit(&taken, int(e.inst))
					}
				}
			}
			if !subsetBits(always, taken) {
				continue // some fair action is always enabled and never taken
			}
			first := comp[0]
			for _, w := range comp {
				if nodes[w].depth < nodes[first].depth {
					first = w
				}
			}
			res.Violated, res.CycleStates = true, len(comp)
			res.Prefix = trace(nodes, int(first))
			seen := map[string]bool{}
			for _, w := range comp {
				for _, e := range adj[w] {
					if usable(e) && in[e.to] {
						name := Step[S]{Action: m.Actions[e.act].Name, Arg: e.arg}.Name()
						if !seen[name] {
							seen[name] = true
							res.Cycle = append(res.Cycle, name)
						}
					}
				}
			}
			slices.Sort(res.Cycle)
		}
	}
	return res
}

func setBit(b *[]uint64, i int) {
	for len(*b) <= i/64 {
		*b = append(*b, 0)
	}
	(*b)[i/64] |= 1 << (i % 64)
}

// andBits is *a &= b, missing words being 0.
func andBits(a *[]uint64, b []uint64) {
	for i := range *a {
		if i < len(b) {
			(*a)[i] &= b[i]
		} else {
			(*a)[i] = 0
		}
	}
}

// subsetBits reports a ⊆ b.
func subsetBits(a, b []uint64) bool {
	for i, w := range a {
		var o uint64
		if i < len(b) {
			o = b[i]
		}
		if w&^o != 0 {
			return false
		}
	}
	return true
}
