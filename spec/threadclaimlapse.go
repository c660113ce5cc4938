package spec

import (
	"fmt"
	"strings"
)

// Capacities of [ThreadState]'s arrays. Fixed arrays keep the state a
// comparable value, so it is its own map key and costs no allocation.
const (
	maxProcs  = 4
	maxMsgs   = 4
	maxClaims = 6
)

// noProc is the lease's holder when it has none (NoProc in the .tla).
const noProc = -1

// Config holds the constants of ThreadClaimLapse.tla. Processes are named
// p1..pN, as in the .cfg files.
type Config struct {
	Procs     int  // number of claimants
	NumMsgs   int  // messages posted, consumed oldest first
	MaxClaims int  // Claim writes markers up to this sequence
	Fence     bool // FENCE: consuming writes need the newest claim marker
}

// DefaultConfig is the model of ThreadClaimLapse.cfg; drift_test.go
// checks that the two agree.
func DefaultConfig() Config {
	return Config{Procs: 2, NumMsgs: 2, MaxClaims: 3, Fence: true}
}

// Validate reports constants outside the capacities of [ThreadState] or
// outside the .tla's ASSUME.
func (c Config) Validate() error {
	switch {
	case c.Procs < 1 || c.Procs > maxProcs:
		return fmt.Errorf("spec: Procs %d not in 1..%d", c.Procs, maxProcs)
	case c.NumMsgs < 1 || c.NumMsgs > maxMsgs:
		return fmt.Errorf("spec: NumMsgs %d not in 1..%d", c.NumMsgs, maxMsgs)
	case c.MaxClaims < 1 || c.MaxClaims > maxClaims:
		return fmt.Errorf("spec: MaxClaims %d not in 1..%d", c.MaxClaims, maxClaims)
	}
	return nil
}

// pcState is where a claimant is in its turn: pc[p] in the .tla.
type pcState uint8

const (
	idle pcState = iota
	abandon
	planned
	running
	replied
	holding
)

var pcNames = [...]string{"idle", "abandon", "planned", "running", "replied", "holding"}

func (s pcState) String() string { return pcNames[s] }

// runState is the state of a run in storage: runs[r] in the .tla.
type runState uint8

const (
	none runState = iota
	active
	ended
	abandoned
)

var runNames = [...]string{"none", "active", "ended", "abandoned"}

func (s runState) String() string { return runNames[s] }

// ThreadState is a state of ThreadClaimLapse. Its fields are the .tla's
// VARIABLES under the same names; messages and runs are indexed from 1,
// as in the .tla, so index 0 is unused.
type ThreadState struct {
	lease     int8 // index of the holder in procs, or noProc
	leaseLive bool
	claimSeq  uint8
	taken     uint8
	consumed  [maxMsgs + 1]uint8
	runs      [maxClaims + 1]runState
	pc        [maxProcs]pcState
	mySeq     [maxProcs]uint8
	seen      [maxProcs]uint8
}

// tcl binds the actions to their constants.
type tcl struct{ c Config }

// ThreadClaimLapse returns the Go transcription of ThreadClaimLapse.tla for
// the constants c. Its actions are Next's disjuncts and its invariants the
// .cfg's, in the same order and under the same names.
func ThreadClaimLapse(c Config) (Model[ThreadState, ThreadState], error) {
	if err := c.Validate(); err != nil {
		return Model[ThreadState, ThreadState]{}, err
	}
	m := tcl{c}
	perProc := func(name string, f func(ThreadState, int) (ThreadState, bool)) Action[ThreadState] {
		return Action[ThreadState]{Name: name, Next: m.exists(f)}
	}
	return Model[ThreadState, ThreadState]{
		Init: []ThreadState{m.Init()},
		Actions: []Action[ThreadState]{
			perProc("Claim", m.Claim),
			{Name: "Lapse", Next: m.lapse},
			perProc("Renew", m.Renew),
			perProc("Release", m.Release),
			perProc("Abandon", m.Abandon),
			perProc("RunStart", m.RunStart),
			perProc("StartFenced", m.StartFenced),
			perProc("Reply", m.Reply),
			perProc("ReplyFenced", m.ReplyFenced),
			perProc("RunEnd", m.RunEnd),
		},
		Invariants: []Invariant[ThreadState]{
			{Name: "TypeOK", Holds: m.TypeOK},
			{Name: "I1_ConsumedAtMostOnce", Holds: m.I1_ConsumedAtMostOnce},
			{Name: "I3_OneActiveRun", Holds: m.I3_OneActiveRun},
		},
		Key:  func(s ThreadState) ThreadState { return s },
		Show: m.show,
	}, nil
}

// exists is \E p \in Procs : f(p).
func (m tcl) exists(f func(ThreadState, int) (ThreadState, bool)) func(ThreadState) []Succ[ThreadState] {
	return func(s ThreadState) []Succ[ThreadState] {
		var out []Succ[ThreadState]
		for p := range m.c.Procs {
			if t, ok := f(s, p); ok {
				out = append(out, Succ[ThreadState]{Arg: procName(p), State: t})
			}
		}
		return out
	}
}

func (m tcl) lapse(s ThreadState) []Succ[ThreadState] {
	if t, ok := m.Lapse(s); ok {
		return []Succ[ThreadState]{{State: t}}
	}
	return nil
}

func procName(p int) string { return fmt.Sprintf("p%d", p+1) }

// Init is the .tla's Init.
func (m tcl) Init() ThreadState {
	return ThreadState{lease: noProc}
}

// activeRuns is Cardinality(ActiveRuns).
func (m tcl) activeRuns(s ThreadState) int {
	n := 0
	for r := 1; r <= m.c.MaxClaims; r++ {
		if s.runs[r] == active {
			n++
		}
	}
	return n
}

func (m tcl) newest(s ThreadState, p int) bool { return s.claimSeq == s.mySeq[p] }

func (m tcl) fenced(s ThreadState, p int) bool { return !m.c.Fence || m.newest(s, p) }

func (m tcl) plan(t uint8) pcState {
	if int(t) < m.c.NumMsgs {
		return planned
	}
	return holding
}

// drop is Drop(p): I4, the claimant hands the thread over.
func drop(s *ThreadState, p int) {
	s.pc[p], s.mySeq[p], s.seen[p] = idle, 0, 0
}

// consume is Consume(p, m).
func consume(s *ThreadState, p int, msg uint8) {
	s.taken = msg
	s.consumed[msg]++
	s.seen[p] = msg
}

// Claim is Claim(p): lease acquired when free or lapsed, thread_claimed
// appended, state read, run planned.
func (m tcl) Claim(s ThreadState, p int) (ThreadState, bool) {
	if s.pc[p] != idle || (s.lease != noProc && s.leaseLive) || int(s.claimSeq) >= m.c.MaxClaims {
		return s, false
	}
	s.lease, s.leaseLive = int8(p), true
	s.claimSeq++
	s.mySeq[p] = s.claimSeq
	s.seen[p] = s.taken
	if m.activeRuns(s) > 0 {
		s.pc[p] = abandon
	} else {
		s.pc[p] = m.plan(s.taken)
	}
	return s, true
}

// Lapse is Lapse: the lease expires under its live holder.
func (m tcl) Lapse(s ThreadState) (ThreadState, bool) {
	if s.lease == noProc || !s.leaseLive {
		return s, false
	}
	s.leaseLive = false
	return s, true
}

// Renew is Renew(p).
func (m tcl) Renew(s ThreadState, p int) (ThreadState, bool) {
	if s.mySeq[p] == 0 || s.lease != int8(p) {
		return s, false
	}
	s.leaseLive = true
	return s, true
}

// Release is Release(p).
func (m tcl) Release(s ThreadState, p int) (ThreadState, bool) {
	if s.pc[p] != holding {
		return s, false
	}
	if m.newest(s, p) {
		s.claimSeq++
		s.lease, s.leaseLive = noProc, false
	}
	drop(&s, p)
	return s, true
}

// Abandon is Abandon(p): run_abandoned, fenced, then the plan.
func (m tcl) Abandon(s ThreadState, p int) (ThreadState, bool) {
	if s.pc[p] != abandon || !m.fenced(s, p) {
		return s, false
	}
	for r := 1; r <= m.c.MaxClaims; r++ {
		if s.runs[r] == active {
			s.runs[r] = abandoned
		}
	}
	s.pc[p] = m.plan(s.seen[p])
	return s, true
}

// RunStart is RunStart(p): run_started, fenced, consumes the planned message.
func (m tcl) RunStart(s ThreadState, p int) (ThreadState, bool) {
	if s.pc[p] != planned || !m.fenced(s, p) {
		return s, false
	}
	consume(&s, p, s.seen[p]+1)
	s.runs[s.mySeq[p]] = active
	s.pc[p] = running
	return s, true
}

// StartFenced is StartFenced(p): the fence refuses run_abandoned or
// run_started.
func (m tcl) StartFenced(s ThreadState, p int) (ThreadState, bool) {
	if !m.c.Fence || (s.pc[p] != abandon && s.pc[p] != planned) || m.newest(s, p) {
		return s, false
	}
	drop(&s, p)
	return s, true
}

// Reply is Reply(p): answer_given, fenced, consumes the next message.
func (m tcl) Reply(s ThreadState, p int) (ThreadState, bool) {
	if s.pc[p] != running || int(s.seen[p]) >= m.c.NumMsgs || !m.fenced(s, p) {
		return s, false
	}
	consume(&s, p, s.seen[p]+1)
	s.pc[p] = replied
	return s, true
}

// ReplyFenced is ReplyFenced(p): the fence refuses the answer.
func (m tcl) ReplyFenced(s ThreadState, p int) (ThreadState, bool) {
	if !m.c.Fence || s.pc[p] != running || int(s.seen[p]) >= m.c.NumMsgs || m.newest(s, p) {
		return s, false
	}
	drop(&s, p)
	return s, true
}

// RunEnd is RunEnd(p): refused once the run was abandoned.
func (m tcl) RunEnd(s ThreadState, p int) (ThreadState, bool) {
	if s.pc[p] != running && s.pc[p] != replied {
		return s, false
	}
	if r := s.mySeq[p]; s.runs[r] == active {
		s.runs[r] = ended
		s.pc[p] = holding
	} else {
		drop(&s, p)
	}
	return s, true
}

// TypeOK is TypeOK: each variable within its range, and nothing set
// beyond the constants.
func (m tcl) TypeOK(s ThreadState) bool {
	c := m.c
	ok := (s.lease == noProc || (s.lease >= 0 && int(s.lease) < c.Procs)) &&
		int(s.claimSeq) <= c.MaxClaims+1 &&
		int(s.taken) <= c.NumMsgs
	for i := range s.consumed {
		in := i >= 1 && i <= c.NumMsgs
		ok = ok && (in && int(s.consumed[i]) <= 2*c.MaxClaims || !in && s.consumed[i] == 0)
	}
	for r := range s.runs {
		in := r >= 1 && r <= c.MaxClaims
		ok = ok && int(s.runs[r]) < len(runNames) && (in || s.runs[r] == none)
	}
	for p := range maxProcs {
		in := p < c.Procs
		ok = ok && int(s.pc[p]) < len(pcNames) &&
			(in && int(s.mySeq[p]) <= c.MaxClaims && int(s.seen[p]) <= c.NumMsgs ||
				!in && s.pc[p] == idle && s.mySeq[p] == 0 && s.seen[p] == 0)
	}
	return ok
}

// I1_ConsumedAtMostOnce is I1_ConsumedAtMostOnce: each message is consumed
// at most once.
func (m tcl) I1_ConsumedAtMostOnce(s ThreadState) bool {
	for msg := 1; msg <= m.c.NumMsgs; msg++ {
		if s.consumed[msg] > 1 {
			return false
		}
	}
	return true
}

// I3_OneActiveRun is I3_OneActiveRun: at most one run is active.
func (m tcl) I3_OneActiveRun(s ThreadState) bool { return m.activeRuns(s) <= 1 }

// show renders s as TLC prints a state, one conjunct per variable.
func (m tcl) show(s ThreadState) string {
	procs, msgs, claims := m.c.Procs, m.c.NumMsgs, m.c.MaxClaims
	fn := func(n, from int, f func(i int) string) string {
		parts := make([]string, n)
		for i := range n {
			parts[i] = f(i + from)
		}
		return "<<" + strings.Join(parts, ", ") + ">>"
	}
	perProc := func(f func(p int) string) string {
		parts := make([]string, procs)
		for p := range procs {
			parts[p] = procName(p) + " :> " + f(p)
		}
		return "(" + strings.Join(parts, " @@ ") + ")"
	}
	lease := "NoProc"
	if s.lease != noProc {
		lease = procName(int(s.lease))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "/\\ lease = %s\n", lease)
	fmt.Fprintf(&b, "/\\ leaseLive = %s\n", strings.ToUpper(fmt.Sprint(s.leaseLive)))
	fmt.Fprintf(&b, "/\\ claimSeq = %d\n", s.claimSeq)
	fmt.Fprintf(&b, "/\\ taken = %d\n", s.taken)
	fmt.Fprintf(&b, "/\\ consumed = %s\n", fn(msgs, 1, func(i int) string { return fmt.Sprint(s.consumed[i]) }))
	fmt.Fprintf(&b, "/\\ runs = %s\n", fn(claims, 1, func(i int) string { return fmt.Sprintf("%q", s.runs[i]) }))
	fmt.Fprintf(&b, "/\\ pc = %s\n", perProc(func(p int) string { return fmt.Sprintf("%q", s.pc[p]) }))
	fmt.Fprintf(&b, "/\\ mySeq = %s\n", perProc(func(p int) string { return fmt.Sprint(s.mySeq[p]) }))
	fmt.Fprintf(&b, "/\\ seen = %s", perProc(func(p int) string { return fmt.Sprint(s.seen[p]) }))
	return b.String()
}
