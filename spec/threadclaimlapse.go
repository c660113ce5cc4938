package spec

import (
	"fmt"
	"slices"
	"strings"
)

// Capacities of [ThreadState]'s arrays. Fixed arrays keep the state a
// comparable value, so it is its own map key and costs no allocation.
const (
	maxProcs  = 4
	maxMsgs   = 5 // also the run ids: a run consumes a prompt, RunIds == 1..NumMsgs
	maxClaims = 8
	maxOpen   = 200 // a real run may ask many questions before any answer
)

// noProc is the lease's holder when it has none (NoProc in the .tla).
const noProc = -1

// Config holds the constants of ThreadClaimLapse.tla. Processes are named
// p1..pN, as in the .cfg files.
type Config struct {
	Procs     int  // number of claimants
	NumMsgs   int  // messages posted over time, consumed oldest first
	MaxClaims int  // Claim appends markers up to this sequence
	MaxOpen   int  // requests a run may have open at once
	Fence     bool // FENCE: consuming writes need the newest claim marker
	// LeaseFence is LEASEFENCE: the fence checks the writer's lease, read
	// in a step of its own before the write, instead of the marker.
	LeaseFence bool
	// Forger is FORGER: a writer with runner credentials appends consuming
	// events (and claims) that pass every check the store applies (Forge).
	Forger bool
	// Guard is GUARD: with the claim-subject fence, each consuming write is
	// an atomic batch [guard expecting the run subject's last sequence the
	// holder knows, then the event, fenced].
	Guard bool
	// RunFence is RUNFENCE: claims on the run subject, and every holder
	// write a compare-and-set on the run subject (expecting its last
	// sequence as the holder knows it); no claim-subject fence, so Fence
	// and Guard do not count with it.
	RunFence bool
	// Old is OLD, with RunFence only: the processes (bit p for p+1) that
	// run the old protocol, claims and fence on the claim subject, while
	// the others run RUNFENCE's: a rolling upgrade.
	Old uint8

	// removed names guards taken out of the actions, for the mutation
	// tests only: unexported, so no caller outside the package can weaken
	// the spec it checks against.
	removed mutation
}

// DefaultConfig is the model of ThreadClaimLapse.cfg, the one CI checks;
// drift_test.go checks that the two agree.
func DefaultConfig() Config {
	return Config{Procs: 2, NumMsgs: 2, MaxClaims: 3, MaxOpen: 1, Fence: true}
}

// LargeConfig is the model of ThreadClaimLapse_large.cfg, checked by hand
// (go test ./spec/ -run Large -spec.large); its figures are in README.md.
func LargeConfig() Config {
	return Config{Procs: 3, NumMsgs: 3, MaxClaims: 4, MaxOpen: 1, Fence: true}
}

// LeaseFenceConfig is the model of ThreadClaimLapse_leasefence.cfg: the
// fence on the writer's lease, read before the write, instead of the
// marker. It breaks I1 and I3.
func LeaseFenceConfig() Config {
	c := DefaultConfig()
	c.LeaseFence = true
	return c
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
	case c.MaxOpen < 1 || c.MaxOpen > maxOpen:
		return fmt.Errorf("spec: MaxOpen %d not in 1..%d", c.MaxOpen, maxOpen)
	case c.Old>>c.Procs != 0 || c.Old != 0 && !c.RunFence:
		return fmt.Errorf("spec: Old %b not a set of Procs, or without RunFence", c.Old)
	}
	return nil
}

// pcState is where a claimant is in its turn: pc[p] in the .tla.
type pcState uint8

const (
	idle    pcState = iota
	leased          // holds the lease, will read the claim subject's last seq
	marking         // read it, will append thread_claimed expecting it
	loading         // marker appended, will load the thread up to it and plan
	abandon         // loaded an older claim's active run, will abandon it
	holding         // holds the thread, no run of its own active
	running         // its run is active, as far as it knows
)

var pcNames = [...]string{"idle", "leased", "marking", "loading", "abandon", "holding", "running"}

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
	posted    uint8
	taken     uint8
	consumed  [maxMsgs + 1]uint8
	// rejectPosts has bit m set when message m, pending, was posted under
	// reject.
	rejectPosts uint8
	runs        [maxMsgs + 1]runState
	runClaim    [maxMsgs + 1]uint8
	reqs        [maxMsgs + 1]uint8
	asked       [maxMsgs + 1]uint8
	answered    [maxMsgs + 1]uint8
	pc          [maxProcs]pcState
	mySeq       [maxProcs]uint8
	readSeq     [maxProcs]uint8
	seen        [maxProcs]uint8
	myRun       [maxProcs]uint8
	leaseOK     [maxProcs]bool
	// runCur[p]: the run subject's last sequence as p knows it (what it
	// read, moved by its own writes) is the subject's last. Tracked only
	// with GUARD or RUNFENCE (Track); FALSE otherwise.
	runCur [maxProcs]bool
	// Ghosts of the forger configs: an honest write consumed a message an
	// earlier write consumed (honestDup), or started a run while one was
	// active (honestTwoRuns).
	honestDup     bool
	honestTwoRuns bool
	// oldSeq: with OLD, the newest marker on threads.T.claim (an old
	// process's), numbered as claimSeq numbers every marker; 0 otherwise.
	oldSeq uint8
}

// tcl binds the actions to their constants.
type tcl struct{ c Config }

// ThreadClaimLapse returns the Go transcription of ThreadClaimLapse.tla for
// the constants c. Its actions are Next's disjuncts, its invariants and
// properties the .cfg's, in the same order and under the same names.
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
			{Name: "Post", Next: m.one(m.Post)},
			{Name: "PostIdle", Next: m.one(m.PostIdle)},
			perProc("Acquire", m.Acquire),
			perProc("ReadClaim", m.ReadClaim),
			perProc("Claim", m.Claim),
			perProc("Load", m.Load),
			{Name: "Lapse", Next: m.one(m.Lapse)},
			perProc("Renew", m.Renew),
			perProc("Release", m.Release),
			perProc("Abandon", m.Abandon),
			perProc("RunStart", m.RunStart),
			perProc("StartFenced", m.StartFenced),
			perProc("Ask", m.Ask),
			perProc("Reply", m.Reply),
			perProc("Steer", m.Steer),
			perProc("ReplyFenced", m.ReplyFenced),
			perProc("RunEnd", m.RunEnd),
			perProc("CheckLease", m.CheckLease),
			perProc("Output", m.Output),
			perProc("Reread", m.Reread),
			{Name: "Forge", Next: m.Forge},
		},
		Invariants: m.invariants(),
		Properties: m.properties(),
		Key:        func(s ThreadState) ThreadState { return s },
		Show:       m.show,
	}, nil
}

// invariants are the .cfg's INVARIANTS. With a forger, I1 and I3 are
// broken by the forger alone (a forged run_started while a run is active),
// so its configs check that no honest write breaks them: HonestI1 and
// HonestI3.
func (m tcl) invariants() []Invariant[ThreadState] {
	if m.c.Forger {
		return []Invariant[ThreadState]{
			{Name: "TypeOK", Holds: m.TypeOK},
			{Name: "HonestI1", Holds: m.HonestI1},
			{Name: "HonestI3", Holds: m.HonestI3},
			{Name: "NoneSkipped", Holds: m.NoneSkipped},
			{Name: "AnswerOnce", Holds: m.AnswerOnce},
		}
	}
	return []Invariant[ThreadState]{
		{Name: "TypeOK", Holds: m.TypeOK},
		{Name: "I1_ConsumedAtMostOnce", Holds: m.I1_ConsumedAtMostOnce},
		{Name: "I3_OneActiveRun", Holds: m.I3_OneActiveRun},
		{Name: "NoneSkipped", Holds: m.NoneSkipped},
		{Name: "AnswerOnce", Holds: m.AnswerOnce},
	}
}

// properties are the .cfg's PROPERTIES. With a forger, AbandonOnlyOlder is
// left out: a forged run_started names the newest claim, and its holder,
// loading it, abandons it (the audit flags that abandon, rightly: it
// points at the forgery).
func (m tcl) properties() []Property[ThreadState] {
	ps := []Property[ThreadState]{
		{Name: "FenceNewestClaim", Holds: m.FenceNewestClaim},
		{Name: "ClaimChain", Holds: m.ClaimChain},
		{Name: "NoEndAfterAbandon", Holds: m.NoEndAfterAbandon},
		{Name: "AbandonOnlyOlder", Holds: m.AbandonOnlyOlder},
		{Name: "RejectOnlyIdle", Holds: m.RejectOnlyIdle},
	}
	if m.c.Forger {
		ps = slices.DeleteFunc(ps, func(p Property[ThreadState]) bool { return p.Name == "AbandonOnlyOlder" })
	}
	return ps
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

// one is an action without a process argument.
func (m tcl) one(f func(ThreadState) (ThreadState, bool)) func(ThreadState) []Succ[ThreadState] {
	return func(s ThreadState) []Succ[ThreadState] {
		if t, ok := f(s); ok {
			return []Succ[ThreadState]{{State: t}}
		}
		return nil
	}
}

// procNames are p1..pN, made once: every successor names its process.
var procNames = func() (n [maxProcs]string) {
	for p := range n {
		n[p] = fmt.Sprintf("p%d", p+1)
	}
	return n
}()

func procName(p int) string { return procNames[p] }

// procIndex is the inverse of procName, -1 for anything else.
func procIndex(arg string) int {
	for p, n := range procNames {
		if n == arg {
			return p
		}
	}
	return -1
}

// Init is the .tla's Init.
func (m tcl) Init() ThreadState {
	return ThreadState{lease: noProc}
}

// activeRuns is Cardinality(ActiveRuns).
func (m tcl) activeRuns(s ThreadState) int {
	n := 0
	for r := 1; r <= m.c.NumMsgs; r++ {
		if s.runs[r] == active {
			n++
		}
	}
	return n
}

// nRuns is NRuns: the runs started so far; the next one is NRuns + 1.
func (m tcl) nRuns(s ThreadState) int {
	n := 0
	for r := 1; r <= m.c.NumMsgs; r++ {
		if s.runs[r] != none {
			n++
		}
	}
	return n
}

func (m tcl) newest(s ThreadState, p int) bool { return s.claimSeq == s.mySeq[p] }

// old is Old(p): p runs the old protocol (OLD).
func (m tcl) old(p int) bool { return m.c.Old&(1<<p) != 0 }

// oldNewest is OldNewest(p): p's marker is the newest on the claim
// subject, all an old process's fence and fold see.
func (m tcl) oldNewest(s ThreadState, p int) bool { return s.oldSeq == s.mySeq[p] }

// fenced is Fenced(p); off removes the guard for a mutation test.
func (m tcl) fenced(s ThreadState, p int, off mutation) bool {
	if m.c.removed&off != 0 {
		return true
	}
	if m.c.LeaseFence {
		return s.leaseOK[p]
	}
	if m.old(p) {
		return m.oldNewest(s, p)
	}
	if m.c.RunFence {
		return s.runCur[p]
	}
	return !m.c.Fence || m.newest(s, p) && (!m.c.Guard || s.runCur[p])
}

// track is Track: the run subject's last sequence is tracked (runCur).
func (m tcl) track() bool { return m.c.RunFence || m.c.Guard }

// runWrite is RunWrite(p): p's write lands on the run subject, and p
// learns its sequence from the ack; no one else knows the last one now.
func (m tcl) runWrite(s *ThreadState, p int) {
	if m.track() {
		for q := range m.c.Procs {
			s.runCur[q] = q == p
		}
	}
}

// endCAS is EndCAS(p), the check of request_opened, run_output and the
// run's end: a compare-and-set on the run subject. Untracked, the model
// takes it as "the run is still active" (only its abandon moves the run
// subject under the holder); tracked, it is the compare-and-set itself.
func (m tcl) endCAS(s ThreadState, p int, off mutation) bool {
	if m.cut(off) {
		return true
	}
	if m.track() {
		return s.runCur[p]
	}
	return s.runs[s.myRun[p]] == active
}

// refused is Refused(p): the fence refuses p's write.
func (m tcl) refused(s ThreadState, p int) bool {
	if m.c.LeaseFence {
		return !s.leaseOK[p] || m.cut(mutRefuseNewest)
	}
	if m.old(p) {
		return !m.oldNewest(s, p) || m.cut(mutRefuseNewest)
	}
	if m.c.RunFence {
		return !s.runCur[p] || m.cut(mutRefuseNewest)
	}
	return m.c.Fence && (!m.newest(s, p) || m.c.Guard && !s.runCur[p] || m.cut(mutRefuseNewest))
}

func (m tcl) cut(g mutation) bool { return m.c.removed&g != 0 }

// pending is seen[p] < posted: a message p knows to be untaken exists.
func (m tcl) pending(s ThreadState, p int) bool { return s.seen[p] < s.posted }

// drop is Drop(p): I4, the claimant hands the thread over.
func drop(s *ThreadState, p int) {
	s.pc[p], s.mySeq[p], s.readSeq[p], s.seen[p], s.myRun[p], s.leaseOK[p] = idle, 0, 0, 0, 0, false
	s.runCur[p] = false
}

// consume is Consume(p, m).
func (m tcl) consume(s *ThreadState, p int, msg uint8) {
	// The ghost, with a forger only: without one every write is honest,
	// and I1 says it (kept FALSE, the state counts stay those without it).
	if m.c.Forger && s.consumed[msg] > 0 {
		s.honestDup = true
	}
	s.taken = msg
	s.consumed[msg]++
	s.seen[p] = msg
	s.rejectPosts &^= 1 << msg
}

// Post is Post: a client posts the next message (message_posted).
func (m tcl) Post(s ThreadState) (ThreadState, bool) {
	if int(s.posted) >= m.c.NumMsgs {
		return s, false
	}
	s.posted++
	return s, true
}

// PostIdle is PostIdle: a post under the reject strategy, which lands only
// while no run is active (its check on the run subject), and is recorded
// as such in rejectPosts.
func (m tcl) PostIdle(s ThreadState) (ThreadState, bool) {
	if m.activeRuns(s) > 0 && !m.cut(mutRejectIdle) {
		return s, false
	}
	t, ok := m.Post(s)
	if !ok {
		return s, false
	}
	t.rejectPosts |= 1 << t.posted
	return t, true
}

// Acquire is Acquire(p): step 1 of a claim, the lease taken when free,
// lapsed, or its own session's already (a lapsed lease is not live, and a
// free one never is).
func (m tcl) Acquire(s ThreadState, p int) (ThreadState, bool) {
	if s.pc[p] != idle || (s.lease != int8(p) && s.leaseLive && !m.cut(mutLeaseLive)) {
		return s, false
	}
	s.lease, s.leaseLive = int8(p), true
	s.pc[p] = leased
	return s, true
}

// ReadClaim is ReadClaim(p): step 2, the claim subject's last sequence.
func (m tcl) ReadClaim(s ThreadState, p int) (ThreadState, bool) {
	if s.pc[p] != leased {
		return s, false
	}
	s.readSeq[p] = s.claimSeq
	switch {
	case m.old(p):
		s.readSeq[p] = s.oldSeq // the claim subject's last
	case m.c.RunFence:
		s.runCur[p] = true // the claim is read on the run subject
	}
	s.pc[p] = marking
	return s, true
}

// Claim is Claim(p): step 3, thread_claimed appended expecting what p read.
// On a conflict p reads again while the lease is its own, else lets go.
func (m tcl) Claim(s ThreadState, p int) (ThreadState, bool) {
	if s.pc[p] != marking || int(s.claimSeq) >= m.c.MaxClaims {
		return s, false
	}
	switch {
	case m.claimCAS(s, p) || m.cut(mutClaimCAS):
		s.claimSeq++
		s.mySeq[p] = s.claimSeq
		s.pc[p] = loading
		switch {
		case m.old(p):
			s.oldSeq = s.claimSeq
		case m.c.RunFence:
			m.runWrite(&s, p)
		}
	case s.lease == int8(p) || m.cut(mutRetryLease):
		s.pc[p] = leased
	default:
		drop(&s, p)
	}
	return s, true
}

// claimCAS is ClaimCAS(p): thread_claimed's compare-and-set, on the claim
// subject (what ReadClaim read) or, with RUNFENCE, on the run subject.
func (m tcl) claimCAS(s ThreadState, p int) bool {
	if m.old(p) {
		return s.oldSeq == s.readSeq[p]
	}
	if m.c.RunFence {
		return s.runCur[p]
	}
	return s.claimSeq == s.readSeq[p]
}

// Load is Load(p): step 4, the thread loaded up to at least p's marker,
// then the plan: abandon an older claim's active run, or hold.
func (m tcl) Load(s ThreadState, p int) (ThreadState, bool) {
	if s.pc[p] != loading {
		return s, false
	}
	if m.cut(mutReplay) {
		// Planned on what p knew before it claimed: nothing.
		s.pc[p] = holding
		return s, true
	}
	s.seen[p] = s.taken
	if m.track() {
		// The load reads the run subject to its end: p knows its last
		// sequence, unless a newer marker than its own is in it.
		s.runCur[p] = m.newest(s, p) || m.cut(mutLoadNewest)
		if m.old(p) {
			s.runCur[p] = m.oldNewest(s, p) // it sees no run-subject marker
		}
	}
	if m.activeRuns(s) > 0 && !m.cut(mutLoadAbandon) {
		s.pc[p] = abandon
	} else {
		s.pc[p] = holding
	}
	return s, true
}

// Lapse is Lapse: the holder's session lapses, and with it the lease.
func (m tcl) Lapse(s ThreadState) (ThreadState, bool) {
	if s.lease == noProc || !s.leaseLive {
		return s, false
	}
	s.leaseLive = false
	return s, true
}

// Renew is Renew(p): p renews its session, which must not have lapsed.
func (m tcl) Renew(s ThreadState, p int) (ThreadState, bool) {
	if s.pc[p] == idle || (s.lease != int8(p) && !m.cut(mutRenewOther)) || (!s.leaseLive && !m.cut(mutRevive)) {
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
	if m.releaseCAS(s, p) || m.cut(mutReleaseOwn) {
		switch {
		case m.old(p):
			s.oldSeq = s.claimSeq + 1
		case m.c.RunFence:
			m.runWrite(&s, p)
		}
		s.claimSeq++
		if s.lease == int8(p) {
			s.lease, s.leaseLive = noProc, false
		}
	}
	drop(&s, p)
	return s, true
}

// releaseCAS is ReleaseCAS(p): thread_released's compare-and-set, on p's
// own marker or, with RUNFENCE, on the run subject as p knows it.
func (m tcl) releaseCAS(s ThreadState, p int) bool {
	if m.old(p) {
		return m.oldNewest(s, p)
	}
	if m.c.RunFence {
		return s.runCur[p]
	}
	return m.newest(s, p)
}

// Abandon is Abandon(p): run_abandoned, fenced.
func (m tcl) Abandon(s ThreadState, p int) (ThreadState, bool) {
	if s.pc[p] != abandon || !m.fenced(s, p, mutFenceAbandon) {
		return s, false
	}
	for r := 1; r <= m.c.NumMsgs; r++ {
		if s.runs[r] == active {
			s.runs[r] = abandoned
		}
	}
	m.runWrite(&s, p)
	s.pc[p] = holding
	return s, true
}

// RunStart is RunStart(p): run_started, fenced, consumes the oldest
// message p knows untaken and opens run NRuns + 1.
func (m tcl) RunStart(s ThreadState, p int) (ThreadState, bool) {
	// NRuns < NumMsgs bounds the model (with the fence it never binds: each
	// run consumes a message of its own); seen[p] < NumMsgs is implied by
	// pending, and keeps the index in range when a mutation cuts pending.
	if s.pc[p] != holding || (!m.pending(s, p) && !m.cut(mutPosted)) ||
		!m.fenced(s, p, mutFenceRunStart) || m.nRuns(s) >= m.c.NumMsgs || int(s.seen[p]) >= m.c.NumMsgs {
		return s, false
	}
	msg := s.seen[p] + 1
	if m.cut(mutOldest) {
		msg = s.posted // the newest pending message
	}
	if m.c.Forger && m.activeRuns(s) > 0 {
		s.honestTwoRuns = true
	}
	m.consume(&s, p, msg)
	m.runWrite(&s, p)
	r := uint8(m.nRuns(s) + 1)
	s.runs[r], s.runClaim[r] = active, s.mySeq[p]
	s.myRun[p] = r
	s.pc[p] = running
	return s, true
}

// StartFenced is StartFenced(p): the fence refuses run_abandoned or
// run_started.
func (m tcl) StartFenced(s ThreadState, p int) (ThreadState, bool) {
	if !m.refused(s, p) || !(s.pc[p] == abandon || s.pc[p] == holding && m.pending(s, p)) {
		return s, false
	}
	drop(&s, p)
	return s, true
}

// Ask is Ask(p): request_opened, compare-and-set on the run subject.
func (m tcl) Ask(s ThreadState, p int) (ThreadState, bool) {
	r := s.myRun[p]
	if s.pc[p] != running || !m.endCAS(s, p, mutAskCAS) || int(s.reqs[r]) >= m.c.MaxOpen {
		return s, false
	}
	s.reqs[r]++
	s.asked[r]++
	m.runWrite(&s, p)
	return s, true
}

// Reply is Reply(p): answer_given, fenced, consumes the next message as
// the answer to one of the run's open requests.
func (m tcl) Reply(s ThreadState, p int) (ThreadState, bool) {
	r := s.myRun[p]
	if s.pc[p] != running || (s.reqs[r] == 0 && !m.cut(mutAnswerOpen)) || !m.pending(s, p) ||
		!m.fenced(s, p, mutFenceReply) {
		return s, false
	}
	m.consume(&s, p, s.seen[p]+1)
	if s.reqs[r] > 0 && !m.cut(mutReplyClose) {
		s.reqs[r]--
	}
	s.answered[r]++
	m.runWrite(&s, p)
	return s, true
}

// Steer is Steer(p): steering_given, fenced, consumes the next message.
func (m tcl) Steer(s ThreadState, p int) (ThreadState, bool) {
	if s.pc[p] != running || !m.pending(s, p) || !m.fenced(s, p, mutFenceSteer) {
		return s, false
	}
	m.consume(&s, p, s.seen[p]+1)
	m.runWrite(&s, p)
	return s, true
}

// ReplyFenced is ReplyFenced(p): the fence refuses answer_given or
// steering_given.
func (m tcl) ReplyFenced(s ThreadState, p int) (ThreadState, bool) {
	if s.pc[p] != running || !m.pending(s, p) || !m.refused(s, p) {
		return s, false
	}
	drop(&s, p)
	return s, true
}

// RunEnd is RunEnd(p): run_completed or run_failed, compare-and-set on the
// run subject; refused once the run was abandoned.
func (m tcl) RunEnd(s ThreadState, p int) (ThreadState, bool) {
	if s.pc[p] != running {
		return s, false
	}
	switch r := s.myRun[p]; {
	case m.endCAS(s, p, mutEndCAS):
		s.runs[r] = ended
		s.myRun[p] = 0
		s.pc[p] = holding
		m.runWrite(&s, p)
	case m.cut(mutKeepHolding):
		// Refused, and holds on as if it had ended.
		s.myRun[p] = 0
		s.pc[p] = holding
	default:
		drop(&s, p)
	}
	return s, true
}

// CheckLease is CheckLease(p): with LEASEFENCE, p reads whether the lease
// is still its own and live, before a fenced write; the write lands later.
func (m tcl) CheckLease(s ThreadState, p int) (ThreadState, bool) {
	if !m.c.LeaseFence || s.pc[p] != abandon && s.pc[p] != holding && s.pc[p] != running {
		return s, false
	}
	s.leaseOK[p] = s.lease == int8(p) && s.leaseLive
	return s, true
}

// Output is Output(p): run_output, tracked only (untracked, a stutter the
// spec leaves out): a compare-and-set on the run subject, like
// request_opened, that moves the run subject and changes nothing else.
// Refused, it writes nothing.
func (m tcl) Output(s ThreadState, p int) (ThreadState, bool) {
	if !m.track() || s.pc[p] != running {
		return s, false
	}
	if m.cut(mutOutputBlind) {
		// Unchecked, and p does not take its ack's sequence for the run
		// subject's last: no one knows it now, p included.
		s.runCur = [maxProcs]bool{}
		return s, true
	}
	if !m.endCAS(s, p, mutOutputCAS) {
		return s, false
	}
	m.runWrite(&s, p)
	return s, true
}

// Reread is Reread(p), tracked only: p's write was refused because the run
// subject moved (a guard's ErrRunMoved, or RUNFENCE's compare-and-set), p
// reads the thread again, finds its marker still the newest, and folds
// what it had not seen: a forged consumption, or a forged run_started,
// which it plans to abandon. Finding a newer marker, it stops instead
// (StartFenced, ReplyFenced, RunEnd's refusal: I4). A running p goes on
// only while its run is the one active.
func (m tcl) Reread(s ThreadState, p int) (ThreadState, bool) {
	if !m.track() || m.old(p) || s.runCur[p] || !m.newest(s, p) && !m.cut(mutRereadNewest) {
		return s, false
	}
	switch s.pc[p] {
	case abandon, holding:
		if m.activeRuns(s) > 0 {
			s.pc[p] = abandon
		} else {
			s.pc[p] = holding
		}
	case running:
		if m.activeRuns(s) != 1 || s.runs[s.myRun[p]] != active {
			return s, false
		}
	default:
		return s, false
	}
	s.seen[p] = s.taken
	s.runCur[p] = true
	return s, true
}

// Forge is Forge: with FORGER, a writer with runner credentials, which
// knows every sequence and so passes every check the store applies,
// appends run_started of the oldest pending message ("start"), an
// answer_given or steering_given consuming it ("given"; the model takes
// a forged answer as steering: it closes no request), or thread_claimed
// ("claim", on the claim subject, or the run subject with RUNFENCE).
// Every forged write but a claim on the claim subject moves the run
// subject, so no holder knows its last sequence any more.
func (m tcl) Forge(s ThreadState) []Succ[ThreadState] {
	if !m.c.Forger {
		return nil
	}
	var out []Succ[ThreadState]
	moved := func(t ThreadState) ThreadState {
		if m.track() {
			t.runCur = [maxProcs]bool{}
		}
		return t
	}
	take := func(t ThreadState) ThreadState {
		t.taken++
		t.consumed[t.taken]++
		t.rejectPosts &^= 1 << t.taken
		return t
	}
	if s.taken < s.posted {
		if n := m.nRuns(s); n < m.c.NumMsgs && int(s.claimSeq) <= m.c.MaxClaims {
			t := take(s)
			t.runs[n+1], t.runClaim[n+1] = active, s.claimSeq
			out = append(out, Succ[ThreadState]{Arg: "start", State: moved(t)})
		}
		out = append(out, Succ[ThreadState]{Arg: "given", State: moved(take(s))})
	}
	if int(s.claimSeq) < m.c.MaxClaims {
		t := s
		t.claimSeq++
		if m.c.RunFence {
			t = moved(t)
		}
		out = append(out, Succ[ThreadState]{Arg: "claim", State: t})
	}
	return out
}

// TypeOK is TypeOK: each variable within its range, nothing set beyond
// the constants, and nothing consumed that was not posted.
func (m tcl) TypeOK(s ThreadState) bool {
	c := m.c
	ok := (s.lease == noProc || (s.lease >= 0 && int(s.lease) < c.Procs)) &&
		int(s.claimSeq) <= c.MaxClaims+1 && int(s.oldSeq) <= c.MaxClaims+1 &&
		int(s.posted) <= c.NumMsgs && s.taken <= s.posted
	for i := range s.consumed {
		in := i >= 1 && i <= c.NumMsgs
		ok = ok && (in && int(s.consumed[i]) <= c.MaxClaims || !in && s.consumed[i] == 0)
		ok = ok && int(s.runs[i]) < len(runNames) && (in || s.runs[i] == none && s.runClaim[i] == 0 && s.reqs[i] == 0)
		ok = ok && int(s.runClaim[i]) <= c.MaxClaims && int(s.reqs[i]) <= c.MaxOpen &&
			int(s.asked[i]) <= c.NumMsgs+c.MaxOpen && int(s.answered[i]) <= c.NumMsgs &&
			(in || s.asked[i] == 0 && s.answered[i] == 0)
	}
	ok = ok && s.rejectPosts&^(1<<(c.NumMsgs+1)-2) == 0
	for p := range maxProcs {
		in := p < c.Procs
		ok = ok && int(s.pc[p]) < len(pcNames) &&
			(in && int(s.mySeq[p]) <= c.MaxClaims && int(s.readSeq[p]) <= c.MaxClaims+1 &&
				int(s.seen[p]) <= c.NumMsgs && int(s.myRun[p]) <= c.NumMsgs ||
				!in && s.pc[p] == idle && s.mySeq[p] == 0 && s.readSeq[p] == 0 && s.seen[p] == 0 && s.myRun[p] == 0 && !s.leaseOK[p] && !s.runCur[p])
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

// HonestI1 is HonestI1: no honest write consumed a message an earlier
// write consumed.
func (m tcl) HonestI1(s ThreadState) bool { return !s.honestDup }

// HonestI3 is HonestI3: no honest run_started landed while a run was
// active.
func (m tcl) HonestI3(s ThreadState) bool { return !s.honestTwoRuns }

// I3_OneActiveRun is I3_OneActiveRun: at most one run is active.
func (m tcl) I3_OneActiveRun(s ThreadState) bool { return m.activeRuns(s) <= 1 }

// NoneSkipped is NoneSkipped: every message up to the taken cursor was
// consumed exactly once, and none after it, so messages are consumed in
// order and none is passed over.
func (m tcl) NoneSkipped(s ThreadState) bool {
	for msg := 1; msg <= m.c.NumMsgs; msg++ {
		want := uint8(0)
		if msg <= int(s.taken) {
			want = 1
		}
		if s.consumed[msg] != want {
			return false
		}
	}
	return true
}

// AnswerOnce is AnswerOnce: each of a run's requests is open or answered
// once: no request is answered twice, nor answered without being open.
func (m tcl) AnswerOnce(s ThreadState) bool {
	for r := 1; r <= m.c.NumMsgs; r++ {
		if int(s.answered[r])+int(s.reqs[r]) != int(s.asked[r]) {
			return false
		}
	}
	return true
}

// FenceNewestClaim is FenceNewestClaim: every fenced write (Abandon,
// RunStart, Reply, Steer) is made under the newest claim marker.
func (m tcl) FenceNewestClaim(s ThreadState, to Step[ThreadState]) bool {
	switch to.Action {
	case "Abandon", "RunStart", "Reply", "Steer":
		return m.newest(s, procIndex(to.Arg))
	}
	return true
}

// ClaimChain is ClaimChain: thread_claimed lands only on the claim
// subject's sequence its writer read, thread_released only on the
// releaser's own marker.
func (m tcl) ClaimChain(s ThreadState, to Step[ThreadState]) bool {
	if to.State.claimSeq == s.claimSeq {
		return true
	}
	p := procIndex(to.Arg)
	switch to.Action {
	case "Claim":
		return s.readSeq[p] == s.claimSeq && (!m.c.RunFence || s.runCur[p])
	case "Release":
		return m.newest(s, p) && (!m.c.RunFence || s.runCur[p])
	}
	return true
}

// NoEndAfterAbandon is NoEndAfterAbandon: an abandoned run stays abandoned
// and takes no more events (no end, no request, no answer).
func (m tcl) NoEndAfterAbandon(s ThreadState, to Step[ThreadState]) bool {
	for r := 1; r <= m.c.NumMsgs; r++ {
		if s.runs[r] == abandoned && (to.State.runs[r] != abandoned ||
			to.State.asked[r] != s.asked[r] || to.State.answered[r] != s.answered[r]) {
			return false
		}
	}
	return true
}

// AbandonOnlyOlder is AbandonOnlyOlder: only a run started under an older
// claim than the newest is abandoned.
func (m tcl) AbandonOnlyOlder(s ThreadState, to Step[ThreadState]) bool {
	for r := 1; r <= m.c.NumMsgs; r++ {
		if s.runs[r] != abandoned && to.State.runs[r] == abandoned && s.runClaim[r] >= s.claimSeq {
			return false
		}
	}
	return true
}

// RejectOnlyIdle is RejectOnlyIdle: a message posted under reject is
// posted while no run is active.
func (m tcl) RejectOnlyIdle(s ThreadState, to Step[ThreadState]) bool {
	return to.State.rejectPosts&^s.rejectPosts == 0 || m.activeRuns(s) == 0
}

// show renders s as TLC prints a state, one conjunct per variable.
func (m tcl) show(s ThreadState) string {
	procs, msgs := m.c.Procs, m.c.NumMsgs
	fn := func(n int, f func(i int) string) string {
		parts := make([]string, n)
		for i := range n {
			parts[i] = f(i + 1)
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
	fmt.Fprintf(&b, "/\\ posted = %d\n", s.posted)
	fmt.Fprintf(&b, "/\\ taken = %d\n", s.taken)
	fmt.Fprintf(&b, "/\\ consumed = %s\n", fn(msgs, func(i int) string { return fmt.Sprint(s.consumed[i]) }))
	var rej []string
	for i := 1; i <= msgs; i++ {
		if s.rejectPosts&(1<<i) != 0 {
			rej = append(rej, fmt.Sprint(i))
		}
	}
	fmt.Fprintf(&b, "/\\ rejectPosts = {%s}\n", strings.Join(rej, ", "))
	fmt.Fprintf(&b, "/\\ runs = %s\n", fn(msgs, func(i int) string { return fmt.Sprintf("%q", s.runs[i]) }))
	fmt.Fprintf(&b, "/\\ runClaim = %s\n", fn(msgs, func(i int) string { return fmt.Sprint(s.runClaim[i]) }))
	fmt.Fprintf(&b, "/\\ reqs = %s\n", fn(msgs, func(i int) string { return fmt.Sprint(s.reqs[i]) }))
	fmt.Fprintf(&b, "/\\ asked = %s\n", fn(msgs, func(i int) string { return fmt.Sprint(s.asked[i]) }))
	fmt.Fprintf(&b, "/\\ answered = %s\n", fn(msgs, func(i int) string { return fmt.Sprint(s.answered[i]) }))
	fmt.Fprintf(&b, "/\\ pc = %s\n", perProc(func(p int) string { return fmt.Sprintf("%q", s.pc[p]) }))
	fmt.Fprintf(&b, "/\\ mySeq = %s\n", perProc(func(p int) string { return fmt.Sprint(s.mySeq[p]) }))
	fmt.Fprintf(&b, "/\\ readSeq = %s\n", perProc(func(p int) string { return fmt.Sprint(s.readSeq[p]) }))
	fmt.Fprintf(&b, "/\\ seen = %s\n", perProc(func(p int) string { return fmt.Sprint(s.seen[p]) }))
	fmt.Fprintf(&b, "/\\ myRun = %s\n", perProc(func(p int) string { return fmt.Sprint(s.myRun[p]) }))
	fmt.Fprintf(&b, "/\\ leaseOK = %s\n", perProc(func(p int) string { return strings.ToUpper(fmt.Sprint(s.leaseOK[p])) }))
	fmt.Fprintf(&b, "/\\ runCur = %s\n", perProc(func(p int) string { return strings.ToUpper(fmt.Sprint(s.runCur[p])) }))
	fmt.Fprintf(&b, "/\\ honestDup = %s\n", strings.ToUpper(fmt.Sprint(s.honestDup)))
	fmt.Fprintf(&b, "/\\ honestTwoRuns = %s\n", strings.ToUpper(fmt.Sprint(s.honestTwoRuns)))
	fmt.Fprintf(&b, "/\\ oldSeq = %d", s.oldSeq)
	return b.String()
}

// WindowConfig is ThreadClaimLapse_window.cfg: today's fence on the claim
// subject, no guard, and a forger. It breaks HonestI1 or HonestI3: the
// window the guard closes.
func WindowConfig() Config {
	c := DefaultConfig()
	c.Forger = true
	return c
}

// GuardConfig is ThreadClaimLapse_guard.cfg: today's fence with the guard,
// and a forger.
func GuardConfig() Config {
	c := WindowConfig()
	c.Guard = true
	return c
}

// RunFenceConfig is ThreadClaimLapse_runfence.cfg: claims on the run
// subject and every holder write a compare-and-set on it, no forger.
func RunFenceConfig() Config {
	c := DefaultConfig()
	c.RunFence = true
	return c
}

// MixedConfig is ThreadClaimLapse_mixed.cfg: RunFenceConfig with p1 on the
// old protocol (claims and fence on the claim subject): a rolling upgrade.
// It breaks I1.
func MixedConfig() Config {
	c := RunFenceConfig()
	c.Old = 1
	return c
}

// RunFenceForgerConfig is ThreadClaimLapse_runfence_forger.cfg:
// RunFenceConfig with a forger.
func RunFenceForgerConfig() Config {
	c := RunFenceConfig()
	c.Forger = true
	return c
}
