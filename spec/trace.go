package spec

import (
	"fmt"
	"slices"
	"strings"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections"
)

// Trace validation: real logs checked against the Go model, as etcd raft
// checks its traces against its TLA+ spec.
//
// Each thread's events, in stream order, are mapped to the spec's actions:
// message_posted is Post, thread_claimed Claim, thread_released Release,
// run_started RunStart, request_opened Ask, answer_given Reply,
// steering_given Steer, run_completed and run_failed RunEnd, run_abandoned
// Abandon. The writer of each event (its holder) is a process of the model:
// each claim is one process, from its marker on. The other steps (Acquire,
// ReadClaim, Load, Lapse, Renew, the refusals, a Claim that conflicts, a
// Release or RunEnd refused) leave nothing in the log, so between two
// events any number of them may happen. The validator keeps every model
// state the log so far could have led to (the frontier); an event conforms
// when its action, by its holder's process, is enabled in one of them,
// after some hidden steps, and does what the event says (the message it
// consumes, the run it names).
//
// run_output is a stutter: it must name the active run, nothing more.
//
// The model is finite and logs are not, so after each event the states are
// renumbered without changing what can happen next: consumed messages are
// forgotten (taken becomes 0, posted the pending count, capped at 1, which
// is all the actions can tell apart), claim sequences become 2 for the
// newest and 1 for older ones, runs no process can touch again are
// forgotten, and a claim that can write nothing more (an older claim whose
// run is not active) gives its process back. Validation is against the
// fenced model (FENCE = TRUE).

// traceConfig is the model the validator checks against: as many
// processes, messages, claims and open requests as the capacities allow.
func traceConfig() Config {
	return Config{Procs: maxProcs, NumMsgs: maxMsgs, MaxClaims: maxClaims, MaxOpen: maxOpen, Fence: true}
}

// Nonconformance is the first event of a thread that the spec does not
// allow.
type Nonconformance struct {
	Thread string      `json:"thread"`
	Seq    uint64      `json:"seq"`
	Type   events.Type `json:"type"`
	Holder string      `json:"holder,omitempty"`
	// Action is the spec action the event maps to, with its process named
	// by its holder, e.g. "RunStart(r1/x)"; "" when it maps to none.
	Action string `json:"action,omitempty"`
	// Expected lists the actions the spec allows next, by holder.
	Expected []string `json:"expected"`
	Reason   string   `json:"reason"`
}

func (n Nonconformance) String() string {
	if n.Type == "" {
		n.Type = "event"
	}
	return fmt.Sprintf("thread %s, seq %d: %s %s; the spec allows next one of [%s]",
		n.Thread, n.Seq, n.Type, n.Reason, strings.Join(n.Expected, ", "))
}

// TraceReport is what a [TraceValidator] found.
type TraceReport struct {
	Events  int `json:"events"`
	Threads int `json:"threads"`
	// Nonconforming lists, per thread that has one, its first event the
	// spec does not allow, in stream order. Later events of that thread
	// are not validated.
	Nonconforming []Nonconformance `json:"nonconforming"`
	// Beyond lists where a log went beyond the model checked in CI
	// (trace_reach.go); it does not fail the validation.
	Beyond []Beyond `json:"beyond_checked,omitempty"`
}

// OK reports whether every event conformed.
func (r TraceReport) OK() bool { return len(r.Nonconforming) == 0 }

// TraceValidator checks logs against ThreadClaimLapse. Feed it envelopes in
// stream order with [TraceValidator.Add], any mix of threads, then call
// [TraceValidator.Report]. It is not safe for concurrent use.
type TraceValidator struct {
	m       Model[ThreadState, ThreadState]
	mt      tcl
	threads map[string]*threadTrace
	order   []string
	events  int
	bad     []Nonconformance
	beyond  []Beyond // trace_reach.go
}

// NewTraceValidator returns a validator against the fenced model.
func NewTraceValidator() *TraceValidator { return newTraceValidator(traceConfig()) }

// newTraceValidator validates against the model of c, which must have the
// trace capacities; the tests give it a weakened one.
func newTraceValidator(c Config) *TraceValidator {
	m, err := ThreadClaimLapse(c)
	if err != nil {
		panic(fmt.Sprintf("spec: trace model: %v", err)) // a constant config
	}
	return &TraceValidator{m: m, mt: tcl{c}, threads: make(map[string]*threadTrace)}
}

// holderInfo is one claim: a process of the model.
type holderInfo struct {
	name   string
	slot   int
	marker uint64 // its thread_claimed
	run    string // the last run it started
}

// threadTrace is one thread's validation state.
type threadTrace struct {
	id       string
	frontier []ThreadState
	slots    [maxProcs]*holderInfo // the live claims, by process
	holders  map[string]*holderInfo
	pending  []uint64               // posted, not yet consumed, oldest first
	runIdx   map[string]uint8       // run id -> its index in the model's runs
	openReqs map[string]string      // request id -> its run, while open
	retired  map[string]*holderInfo // claims that can write nothing more: their processes were given back
	newest   uint64                 // the newest thread_claimed
	released bool                   // the newest claim was released
	// lastEnded is the run that ended last: a new claimant that planned
	// to abandon it may still write its run_abandoned, which changes nothing.
	lastEnded string
	failed    bool
	forked    bool // its thread_forked was validated (trace_fork.go)

	strategy traceStrategy // trace_strategy.go
	reach    uint8         // trace_reach.go
	// ids are the message ids posted: a post of one again is no message
	// (projections.Rules), so no Post action.
	ids map[string]bool
}

// Add validates env, the next envelope of the stream.
func (v *TraceValidator) Add(env events.Envelope) {
	v.events++
	th := v.threads[env.Thread]
	if th == nil {
		th = &threadTrace{
			id:       env.Thread,
			frontier: []ThreadState{v.mt.Init()},
			holders:  make(map[string]*holderInfo),
			runIdx:   make(map[string]uint8),
			openReqs: make(map[string]string),
			retired:  make(map[string]*holderInfo),
		}
		v.threads[env.Thread] = th
		v.order = append(v.order, env.Thread)
	}
	if th.failed {
		return
	}
	if n := v.step(th, &env); n != nil {
		th.failed = true
		n.Thread, n.Seq, n.Type = env.Thread, env.Seq, events.TypeOf(env.Event)
		if n.Type == "" {
			n.Type = env.Type
		}
		if n.Expected == nil {
			n.Expected = v.expected(th)
		}
		v.bad = append(v.bad, *n)
		return
	}
	v.noteReach(th, env.Seq)
}

// Report returns what the validation found so far.
func (v *TraceValidator) Report() TraceReport {
	return TraceReport{Events: v.events, Threads: len(v.threads), Nonconforming: slices.Clone(v.bad), Beyond: v.beyondReport()}
}

func bad(format string, args ...any) *Nonconformance {
	return &Nonconformance{Reason: fmt.Sprintf(format, args...)}
}

// step validates one event of th and moves its frontier.
func (v *TraceValidator) step(th *threadTrace, env *events.Envelope) *Nonconformance {
	if env.Err != nil || env.Event == nil {
		return bad("is malformed: %v", env.Err)
	}
	ev := env.Event
	holder := ev.GetHolder()
	var h *holderInfo
	action := ""
	switch b := ev.GetBody().(type) {
	case *eventspb.Event_MessagePosted:
		if reason := projections.PostFinding(env, th.id); reason != "" {
			return &Nonconformance{Action: "Post", Reason: "is " + reason + ": no client's Post writes it"}
		}
		if id := b.MessagePosted.GetMessageId(); id != "" {
			if th.ids[id] {
				return nil // a repost: no message, no action
			}
			if th.ids == nil {
				th.ids = make(map[string]bool)
			}
			th.ids[id] = true
		}
		post, name := v.mt.Post, "Post"
		if th.postStrategy(b.MessagePosted) == events.StrategyReject { // trace_strategy.go
			post, name = v.mt.PostIdle, "PostIdle"
		}
		for i, s := range th.frontier {
			t, ok := post(s)
			if !ok && name == "PostIdle" {
				return &Nonconformance{Action: name, Reason: "has strategy reject, but a run is active: PostIdle is not enabled"}
			}
			if !ok {
				return bad("cannot be posted: the model holds %d messages", maxMsgs)
			}
			th.frontier[i] = t
		}
		th.pending = append(th.pending, env.Seq)
		v.normalize(th)
		return nil
	case *eventspb.Event_ThreadForked:
		return v.forked(th, env)
	case *eventspb.Event_RunOutput:
		if i, ok := th.runIdx[b.RunOutput.GetRunId()]; !ok || th.frontier[0].runs[i] != active {
			return bad("names run %q, which is not active", b.RunOutput.GetRunId())
		}
		return nil
	case *eventspb.Event_ThreadConfigured, *eventspb.Event_CancelRequested, *eventspb.Event_RunInterrupted:
		return th.strategyEvent(env) // trace_strategy.go
	case *eventspb.Event_ThreadMetadata, *eventspb.Event_ThreadDeleted:
		return nil // no part of the protocol's state
	case *eventspb.Event_ThreadClaimed:
		if hn := b.ThreadClaimed.GetHolder(); hn != "" {
			holder = hn
		}
		if _, dup := th.holders[holder]; dup || th.retired[holder] != nil {
			return bad("by holder %q, which already has a marker", holder)
		}
		slot := slices.Index(th.slots[:], nil)
		if slot < 0 {
			return bad("by holder %q: more than %d claims that can still write, the validator's capacity", holder, maxProcs)
		}
		h = &holderInfo{name: holder, slot: slot}
		action = "Claim"
	default:
		if r := th.retired[holder]; r != nil && !v.revive(th, r) {
			return &Nonconformance{Holder: holder, Reason: fmt.Sprintf("by %s: more than %d claims that can still write, the validator's capacity", holder, maxProcs)}
		}
		if h = th.holders[holder]; h == nil {
			return &Nonconformance{Holder: holder, Reason: fmt.Sprintf("by %s, which has no claim marker in this thread", holder)}
		}
		if ev.GetClaimSeq() != h.marker {
			return &Nonconformance{Holder: holder, Reason: fmt.Sprintf("carries claim_seq %d, but %s's marker is %d", ev.GetClaimSeq(), holder, h.marker)}
		}
		var n *Nonconformance
		action, n = th.checkData(h, ev)
		if n != nil {
			n.Holder, n.Action = holder, action+"("+holder+")"
			return n
		}
	}
	next := v.apply(th, action, h.slot)
	if len(next) == 0 {
		return &Nonconformance{Holder: holder, Action: action + "(" + holder + ")",
			Reason: fmt.Sprintf("by %s: %s(%s) is not enabled", holder, action, holder)}
	}
	th.frontier = next
	th.record(h, env)
	v.retire(th)
	v.normalize(th)
	return nil
}

// checkData maps a run-subject or release event to its action and checks
// that what it names is what the action does.
func (th *threadTrace) checkData(h *holderInfo, ev *eventspb.Event) (string, *Nonconformance) {
	ownRun := func(id string) *Nonconformance {
		if id != h.run {
			return bad("names run %q, but holder %q's run is %q", id, h.name, h.run)
		}
		return nil
	}
	oldest := func(seq uint64) *Nonconformance {
		if len(th.pending) == 0 || th.pending[0] != seq {
			return bad("consumes message %d, not the oldest pending message %v", seq, th.pending[:min(len(th.pending), 1)])
		}
		return nil
	}
	switch b := ev.GetBody().(type) {
	case *eventspb.Event_ThreadReleased:
		return "Release", nil
	case *eventspb.Event_RunStarted:
		if _, dup := th.runIdx[b.RunStarted.GetRunId()]; dup {
			return "RunStart", bad("starts run %q again", b.RunStarted.GetRunId())
		}
		return "RunStart", oldest(b.RunStarted.GetPromptSeq())
	case *eventspb.Event_RequestOpened:
		if _, dup := th.openReqs[b.RequestOpened.GetRequestId()]; dup {
			return "Ask", bad("opens request %q, which is open", b.RequestOpened.GetRequestId())
		}
		return "Ask", ownRun(b.RequestOpened.GetRunId())
	case *eventspb.Event_AnswerGiven:
		id, run := b.AnswerGiven.GetRequestId(), b.AnswerGiven.GetRunId()
		if n := ownRun(run); n != nil {
			return "Reply", n
		}
		if th.openReqs[id] != run {
			return "Reply", bad("answers request %q, which is not an open request of run %q", id, run)
		}
		return "Reply", oldest(b.AnswerGiven.GetMessageSeq())
	case *eventspb.Event_SteeringGiven:
		if n := ownRun(b.SteeringGiven.GetRunId()); n != nil {
			return "Steer", n
		}
		return "Steer", oldest(b.SteeringGiven.GetMessageSeq())
	case *eventspb.Event_RunCompleted:
		return "RunEnd", ownRun(b.RunCompleted.GetRunId())
	case *eventspb.Event_RunFailed:
		return "RunEnd", ownRun(b.RunFailed.GetRunId())
	case *eventspb.Event_RunAbandoned:
		// Abandon abandons the active run; with none, the run it planned to
		// abandon ended first, and the write changes nothing.
		id := b.RunAbandoned.GetRunId()
		i, ok := th.runIdx[id]
		switch {
		case ok && th.frontier[0].runs[i] == active:
			return "Abandon", nil
		case id == th.lastEnded && th.noActive():
			return "Abandon", nil
		}
		return "Abandon", bad("names run %q, which is neither the active run nor the last ended with none active", id)
	}
	return "", bad("maps to no spec action")
}

func (th *threadTrace) noActive() bool {
	for _, r := range th.frontier[0].runs {
		if r == active {
			return false
		}
	}
	return true
}

// visible reports whether a transition of action writes an event: the
// branches that write nothing are hidden steps.
func visible(action string, from, to ThreadState) bool {
	switch action {
	case "Post", "PostIdle", "Abandon", "RunStart", "Ask", "Reply", "Steer":
		return true
	case "Claim", "Release":
		return to.claimSeq != from.claimSeq
	case "RunEnd":
		return to.runs != from.runs
	}
	return false
}

// live returns the processes of the live claims, and extra.
func (th *threadTrace) live(extra int) [maxProcs]bool {
	var on [maxProcs]bool
	for p, h := range th.slots {
		on[p] = h != nil
	}
	if extra >= 0 {
		on[extra] = true
	}
	return on
}

// closure is every state the frontier reaches by hidden steps of the live
// processes; newcomer, the process of a claim about to land, may also
// start its claim (Acquire).
func (v *TraceValidator) closure(th *threadTrace, newcomer int) []ThreadState {
	on := th.live(newcomer)
	seen := make(map[ThreadState]struct{}, len(th.frontier))
	out := make([]ThreadState, 0, len(th.frontier))
	for _, s := range th.frontier {
		if _, ok := seen[s]; !ok {
			seen[s] = struct{}{}
			out = append(out, s)
		}
	}
	for i := 0; i < len(out); i++ {
		s := out[i]
		for _, a := range v.m.Actions {
			for _, succ := range a.Next(s) {
				p := procIndex(succ.Arg)
				if succ.Arg != "" && (p < 0 || !on[p] || a.Name == "Acquire" && p != newcomer) {
					continue
				}
				if visible(a.Name, s, succ.State) {
					continue
				}
				if _, ok := seen[succ.State]; !ok {
					seen[succ.State] = struct{}{}
					out = append(out, succ.State)
				}
			}
		}
	}
	return out
}

// apply returns the states after action by process p from the closure.
func (v *TraceValidator) apply(th *threadTrace, action string, p int) []ThreadState {
	newcomer := -1
	if action == "Claim" {
		newcomer = p
	}
	var next []ThreadState
	seen := make(map[ThreadState]struct{})
	for _, s := range v.closure(th, newcomer) {
		for _, a := range v.m.Actions {
			if a.Name != action {
				continue
			}
			for _, succ := range a.Next(s) {
				if procIndex(succ.Arg) != p || !visible(action, s, succ.State) {
					continue
				}
				if _, ok := seen[succ.State]; !ok {
					seen[succ.State] = struct{}{}
					next = append(next, succ.State)
				}
			}
		}
	}
	return next
}

// expected lists the visible actions enabled after hidden steps, by holder.
func (v *TraceValidator) expected(th *threadTrace) []string {
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	free := slices.Index(th.slots[:], nil)
	for _, s := range v.closure(th, free) {
		for _, a := range v.m.Actions {
			for _, succ := range a.Next(s) {
				if !visible(a.Name, s, succ.State) {
					continue
				}
				switch p := procIndex(succ.Arg); {
				case succ.Arg == "":
					add(a.Name)
				case p >= 0 && th.slots[p] != nil:
					add(a.Name + "(" + th.slots[p].name + ")")
				case p == free && a.Name == "Claim":
					add("Claim(a new holder)")
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

// record updates th's tables for an event that conformed.
func (th *threadTrace) record(h *holderInfo, env *events.Envelope) {
	ev := env.Event
	consume := func() { th.pending = th.pending[1:] }
	switch b := ev.GetBody().(type) {
	case *eventspb.Event_ThreadClaimed:
		h.marker = env.Seq
		th.holders[h.name], th.slots[h.slot] = h, h
		th.newest, th.released = env.Seq, false
	case *eventspb.Event_ThreadReleased:
		th.released = true
	case *eventspb.Event_RunStarted:
		consume()
		h.run = b.RunStarted.GetRunId()
		// RunStart opened run NRuns + 1, the same in every state.
		th.runIdx[h.run] = uint8(tcl{traceConfig()}.nRuns(th.frontier[0]))
	case *eventspb.Event_RequestOpened:
		th.openReqs[b.RequestOpened.GetRequestId()] = b.RequestOpened.GetRunId()
	case *eventspb.Event_AnswerGiven:
		consume()
		delete(th.openReqs, b.AnswerGiven.GetRequestId())
	case *eventspb.Event_SteeringGiven:
		consume()
	case *eventspb.Event_RunCompleted:
		th.lastEnded = b.RunCompleted.GetRunId()
	case *eventspb.Event_RunFailed:
		th.lastEnded = b.RunFailed.GetRunId()
	}
}

// revive gives a retired claim a process again, for an event it wrote: in
// every state, at any step it could be at with its older marker. The model
// then decides whether the event is allowed. Under FENCE it never is: such a
// claim can make no fenced write and no release, and its run is not active.
// It reports false when no process is free.
func (v *TraceValidator) revive(th *threadTrace, h *holderInfo) bool {
	p := slices.Index(th.slots[:], nil)
	if p < 0 {
		return false
	}
	delete(th.retired, h.name)
	h.slot = p
	th.holders[h.name], th.slots[p] = h, h
	run := th.runIdx[h.run] // 0 when forgotten: no longer active
	var out []ThreadState
	for _, s := range th.frontier {
		for _, pc := range []pcState{loading, abandon, holding, running} {
			t := s
			t.pc[p], t.readSeq[p], t.seen[p], t.myRun[p] = pc, 0, 0, 0
			// Older than the newest claim: 1 once renumbered (normalize).
			t.mySeq[p] = 1
			if pc == running {
				t.myRun[p] = run
			}
			out = append(out, t)
		}
	}
	th.frontier = out
	return true
}

// retire gives back the processes of claims that can write nothing more:
// an older claim (or a released one) can make no fenced write, no release,
// and no run event once its run is not active.
func (v *TraceValidator) retire(th *threadTrace) {
	s := th.frontier[0]
	for p, h := range th.slots {
		if h == nil || h.marker == th.newest && !th.released {
			continue
		}
		if i, ok := th.runIdx[h.run]; ok && s.runs[i] == active {
			continue
		}
		th.slots[p] = nil
		delete(th.holders, h.name)
		h.slot = -1
		th.retired[h.name] = h
		for i := range th.frontier {
			drop(&th.frontier[i], p)
		}
	}
}

// normalize renumbers the frontier's states so that they stay within the
// model's capacities, keeping what can happen next (see the package's
// trace validation notes above).
func (v *TraceValidator) normalize(th *threadTrace) {
	s0 := th.frontier[0]
	// Runs kept: the active ones and those of live claims.
	var keep []uint8
	for r := 1; r <= maxMsgs; r++ {
		used := s0.runs[r] == active
		for _, h := range th.slots {
			if h != nil && th.runIdx[h.run] == uint8(r) && h.run != "" {
				used = true
			}
		}
		if used && s0.runs[r] != none {
			keep = append(keep, uint8(r))
		}
	}
	var remap [maxMsgs + 1]uint8
	for i, r := range keep {
		remap[r] = uint8(i + 1)
	}
	for id, r := range th.runIdx {
		if remap[r] == 0 {
			delete(th.runIdx, id)
		} else {
			th.runIdx[id] = remap[r]
		}
	}
	for id, run := range th.openReqs {
		if _, ok := th.runIdx[run]; !ok {
			delete(th.openReqs, id)
		}
	}
	cs := s0.claimSeq
	claim := func(x uint8) uint8 {
		switch {
		case x == 0:
			return 0
		case x >= cs:
			return min(cs, 2)
		}
		return 1
	}
	seen := make(map[ThreadState]struct{}, len(th.frontier))
	out := th.frontier[:0]
	for _, s := range th.frontier {
		t := s
		t.taken, t.consumed = 0, [maxMsgs + 1]uint8{}
		t.posted = uint8(min(len(th.pending), 1))
		t.claimSeq = claim(s.claimSeq)
		t.runs, t.runClaim, t.reqs = [maxMsgs + 1]runState{}, [maxMsgs + 1]uint8{}, [maxMsgs + 1]uint8{}
		for _, r := range keep {
			n := remap[r]
			t.runs[n], t.runClaim[n], t.reqs[n] = s.runs[r], claim(s.runClaim[r]), s.reqs[r]
		}
		forgetAnswered(&t)
		for p := range maxProcs {
			t.seen[p] = 0 // every message up to taken is consumed
			t.mySeq[p], t.readSeq[p] = claim(s.mySeq[p]), claim(s.readSeq[p])
			t.myRun[p] = remap[s.myRun[p]]
		}
		if _, ok := seen[t]; !ok {
			seen[t] = struct{}{}
			out = append(out, t)
		}
	}
	th.frontier = out
}
