package spec

import (
	"fmt"
	"slices"
	"strings"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/audit"
)

// Trace validation: real logs checked against the Go model, as etcd raft
// checks its traces against its TLA+ spec, with the audit's rules.
//
// One rule set. Each event goes first through the plain audit's rules
// (projections/audit: projections.Rules and the audit's checks of how each
// event was appended), and a violation there is a nonconformance. Then the
// event, as the fold applied it, is mapped to the spec's action and
// stepped: the model decides whether the step is enabled. An event the fold
// ignores (malformed, out of order, a repost, a fork that cannot start the
// thread) is no step, and an anomaly is no nonconformance: the two verdicts
// are the audit's and the model's on the same log as the fold reads it.
// Every nonconformance names the audit checks it breaks (Checks) and, when
// the model refuses the step, why (Model); the tests require that the model
// never refuses a step the rules accept (rules.go).
//
// Each thread's events, in stream order, are mapped to the spec's actions:
// message_posted is Post (PostIdle under reject), thread_claimed Claim,
// thread_released Release, run_started RunStart, request_opened Ask,
// answer_given Reply, steering_given Steer, run_completed and run_failed
// RunEnd, run_abandoned Abandon. Each claim is one process of the model,
// from its marker on; an event's process is the claim its claim_seq names.
// The other steps (Acquire, ReadClaim, Load, Lapse, Renew, the refusals, a
// Claim that conflicts, a Release or RunEnd refused) leave nothing in the
// log, so between two events any number of them may happen. The validator
// keeps every model state the log so far could have led to (the frontier);
// an event's step is allowed when its action, by its claim's process, is
// enabled in one of them after some hidden steps.
//
// run_output, run_interrupted, thread_configured, cancel_requested,
// thread_metadata and thread_deleted are stutters: the rules check them.
//
// A thread whose first marker is on its run subject is of the RUNFENCE
// layout (spec README, "Claims on the run subject"), and is validated
// against the RUNFENCE model (Config.RunFence) instead: there run_output is
// Output, a compare-and-set on the run subject, and Reread is a hidden
// step like Load. run_interrupted stays a stutter: the model has no action
// for it, and the rules check its compare-and-set (RunChain).
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
	// Checks are the audit's checks the event breaks (audit.CheckNames),
	// the same violations the plain audit reports on it; none when only
	// the model refuses it, which the tests hold never happens.
	Checks []string `json:"checks,omitempty"`
	// Model says why the model refuses the event's step, "" when it allows
	// it: what the event names that the model cannot see (which message,
	// request or holder) is the rules' alone.
	Model string `json:"model,omitempty"`
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
	m  Model[ThreadState, ThreadState]
	mt tcl
	// rf and rft are the RUNFENCE model, for threads whose markers are on
	// the run subject.
	rf      Model[ThreadState, ThreadState]
	rft     tcl
	rules   *audit.Auditor
	found   []audit.Violation // the rules' violations on the event being added
	ignored bool              // the fold applied nothing of that event
	// modelOnly drops the rules' verdict, for the tests that show what the
	// model decides alone.
	modelOnly bool
	threads   map[string]*threadTrace
	order     []string
	events    int
	bad       []Nonconformance
	beyond    []Beyond // trace_reach.go
	// layout, when known, is every thread's (audit.Options.KnownLayout):
	// runFence tells which.
	layoutKnown, runFence bool
}

// NewTraceValidator returns a validator against the fenced model, with the
// audit's rules for the default subject prefix.
func NewTraceValidator() *TraceValidator { return NewTraceValidatorWith(audit.Options{}) }

// NewTraceValidatorWith returns a validator against the fenced model, with
// the audit's rules configured by o (its Subjects; its hooks are the
// validator's own).
func NewTraceValidatorWith(o audit.Options) *TraceValidator {
	return newTraceValidator(traceConfig(), o)
}

// newTraceValidator validates against the model of c, which must have the
// trace capacities; the tests give it a weakened one.
func newTraceValidator(c Config, o audit.Options) *TraceValidator {
	m, err := ThreadClaimLapse(c)
	if err != nil {
		panic(fmt.Sprintf("spec: trace model: %v", err)) // a constant config
	}
	rc := c
	rc.RunFence = true
	rf, err := ThreadClaimLapse(rc)
	if err != nil {
		panic(fmt.Sprintf("spec: trace model: %v", err))
	}
	v := &TraceValidator{m: m, mt: tcl{c}, rf: rf, rft: tcl{rc}, threads: make(map[string]*threadTrace),
		layoutKnown: o.KnownLayout, runFence: o.Subjects.RunFence}
	o.MaxFindings = 1 // the hooks see every finding; the report is not read
	o.StrandedAfter = 0
	o.OnViolation = func(f audit.Violation) { v.found = append(v.found, f) }
	o.OnAnomaly = func(f audit.Finding) { v.ignored = v.ignored || f.Ignored }
	v.rules = audit.NewWithOptions(o)
	return v
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
	slots    [maxProcs]*holderInfo  // the live claims, by process
	holders  map[uint64]*holderInfo // the live claims, by marker
	pending  []uint64               // posted, not yet consumed, oldest first
	runIdx   map[string]uint8       // run id -> its index in the model's runs
	retired  map[uint64]*holderInfo // claims that can write nothing more: their processes were given back
	newest   uint64                 // the newest thread_claimed
	released bool                   // the newest claim was released
	// lastEnded is the run that ended last: a new claimant that planned
	// to abandon it may still write its run_abandoned, which changes nothing.
	lastEnded string
	failed    bool
	forked    bool // its thread_forked was validated (trace_fork.go)
	// layoutSet and runFence: the thread's first marker was seen, and was
	// on its run subject; the thread is then validated against the
	// RUNFENCE model.
	layoutSet bool
	runFence  bool

	strategy traceStrategy // trace_strategy.go
	reach    uint8         // trace_reach.go
}

// Add validates env, the next envelope of the stream.
func (v *TraceValidator) Add(env events.Envelope) {
	v.events++
	th := v.threads[env.Thread]
	if th == nil {
		th = &threadTrace{
			id:       env.Thread,
			frontier: []ThreadState{v.mt.Init()},
			holders:  make(map[uint64]*holderInfo),
			runIdx:   make(map[string]uint8),
			retired:  make(map[uint64]*holderInfo),
		}
		v.threads[env.Thread] = th
		v.order = append(v.order, env.Thread)
	}
	// The rules see every event, so that their state (another thread's
	// messages, for a fork) is the plain audit's.
	v.found, v.ignored = v.found[:0], false
	v.rules.Add(env)
	if th.failed {
		return
	}
	var checks []string
	if !v.modelOnly {
		for _, f := range v.found {
			if !slices.Contains(checks, f.Check) {
				checks = append(checks, f.Check)
			}
		}
	}
	var n *Nonconformance
	var expected []string
	if len(checks) > 0 {
		expected = v.expected(th) // before the step moves the frontier
	}
	action := ""
	if !v.ignored {
		action, n = v.step(th, &env)
	}
	if n == nil && len(checks) == 0 {
		v.noteReach(th, env.Seq)
		return
	}
	if n == nil {
		n = &Nonconformance{Holder: env.Event.GetHolder(), Action: action}
	} else {
		n.Model = n.Reason
	}
	th.failed = true
	n.Thread, n.Seq, n.Type, n.Checks = env.Thread, env.Seq, events.TypeOf(env.Event), checks
	if n.Type == "" {
		n.Type = env.Type
	}
	var why []string
	for _, f := range v.found {
		if !v.modelOnly {
			why = append(why, "breaks "+f.Check+": "+f.Message)
		}
	}
	if n.Model != "" {
		why = append(why, "the model: "+n.Model)
	} else if action != "" {
		why = append(why, "the model allows the step, "+action)
	}
	n.Reason = strings.Join(why, "; ")
	switch {
	case expected != nil:
		n.Expected = expected
	case n.Expected == nil:
		n.Expected = v.expected(th) // the model refused: the frontier stayed
	}
	v.bad = append(v.bad, *n)
}

// model returns th's model: RUNFENCE's when its markers are on the run
// subject. Before the first marker the two agree: only Post, PostIdle and
// stutters can be stepped, and neither model's hidden steps move a state
// with no claimant.
func (v *TraceValidator) model(th *threadTrace) (Model[ThreadState, ThreadState], tcl) {
	if th.runFence {
		return v.rf, v.rft
	}
	return v.m, v.mt
}

// Report returns what the validation found so far.
func (v *TraceValidator) Report() TraceReport {
	return TraceReport{Events: v.events, Threads: len(v.threads), Nonconforming: slices.Clone(v.bad), Beyond: v.beyondReport()}
}

func bad(format string, args ...any) *Nonconformance {
	return &Nonconformance{Reason: fmt.Sprintf(format, args...)}
}

// step maps one event of th, as the fold applied it, to its action,
// moves the frontier, and returns the action by its holder ("" for a
// stutter), or why the model refuses it.
// What the event names that the model cannot see (which message, request
// or run; its holder) is the rules' to check, not step's.
func (v *TraceValidator) step(th *threadTrace, env *events.Envelope) (string, *Nonconformance) {
	if env.Err != nil || env.Event == nil {
		return "", bad("is malformed: %v", env.Err) // the rules ignore it first
	}
	ev := env.Event
	var h *holderInfo
	action := ""
	switch b := ev.GetBody().(type) {
	case *eventspb.Event_MessagePosted:
		_, mt := v.model(th)
		post, name := mt.Post, "Post"
		if th.postStrategy(b.MessagePosted) == events.StrategyReject { // trace_strategy.go
			post, name = mt.PostIdle, "PostIdle"
		}
		// Post is no process's step, and has no hidden step before it that
		// could enable it: each state of the frontier must allow it.
		for _, s := range th.frontier {
			if _, ok := post(s); !ok && name == "PostIdle" {
				return name, &Nonconformance{Action: name, Reason: "has strategy reject, but a run is active: PostIdle is not enabled"}
			} else if !ok {
				return name, bad("cannot be posted: the model holds %d messages", maxMsgs)
			}
		}
		for i, s := range th.frontier {
			th.frontier[i], _ = post(s)
		}
		th.pending = append(th.pending, env.Seq)
		v.normalize(th)
		return name, nil
	case *eventspb.Event_ThreadForked:
		return "", v.forked(th, env)
	case *eventspb.Event_ThreadConfigured, *eventspb.Event_CancelRequested, *eventspb.Event_RunInterrupted,
		*eventspb.Event_ThreadMetadata, *eventspb.Event_ThreadDeleted:
		th.strategyEvent(env) // trace_strategy.go
		return "", nil
	case *eventspb.Event_RunOutput:
		if !th.runFence {
			return "", nil // a stutter: the claim layout's model has no Output
		}
		var n *Nonconformance
		if h, action, n = v.writer(th, ev); n != nil {
			return "", n
		}
	case *eventspb.Event_ThreadClaimed:
		holder := b.ThreadClaimed.GetHolder()
		if holder == "" {
			holder = ev.GetHolder()
		}
		slot := slices.Index(th.slots[:], nil)
		if slot < 0 {
			return "Claim", bad("by holder %q: more than %d claims that can still write, the validator's capacity", holder, maxProcs)
		}
		v.setLayout(th, env)
		h = &holderInfo{name: holder, slot: slot}
		action = "Claim"
	default:
		if ev.GetThreadReleased() != nil {
			v.setLayout(th, env)
		}
		var n *Nonconformance
		if h, action, n = v.writer(th, ev); n != nil {
			return "", n
		}
	}
	next := v.apply(th, action, h.slot)
	if len(next) == 0 {
		return action, &Nonconformance{Holder: h.name, Action: action + "(" + h.name + ")",
			Reason: fmt.Sprintf("%s(%s) is not enabled", action, h.name)}
	}
	th.frontier = next
	th.record(h, env)
	v.retire(th)
	v.normalize(th)
	return action + "(" + h.name + ")", nil
}

// setLayout fixes th's layout: the stream's when it is known, else by its
// first marker, env: RUNFENCE when it is on the run subject. Writers of the
// two layouts never share a stream (the rules flag a marker on the other
// subject: ClaimChain).
func (v *TraceValidator) setLayout(th *threadTrace, env *events.Envelope) {
	switch {
	case th.layoutSet:
	case v.layoutKnown:
		th.layoutSet, th.runFence = true, v.runFence
	default:
		th.layoutSet = true
		th.runFence = projections.SubjectKind(env, events.TypeOf(env.Event)) == events.KindRun
	}
}

// writer returns the claim, a process, that wrote ev (a holder's write
// other than its marker) and ev's action, or why the model has none.
func (v *TraceValidator) writer(th *threadTrace, ev *eventspb.Event) (*holderInfo, string, *Nonconformance) {
	cs := ev.GetClaimSeq()
	if r := th.retired[cs]; r != nil && !v.revive(th, r) {
		return nil, "", &Nonconformance{Holder: ev.GetHolder(), Reason: fmt.Sprintf("under claim %d: more than %d claims that can still write, the validator's capacity", cs, maxProcs)}
	}
	h := th.holders[cs]
	if h == nil {
		return nil, "", &Nonconformance{Holder: ev.GetHolder(), Reason: fmt.Sprintf("carries claim_seq %d, which is no claim marker of this thread: no process of the model wrote it", cs)}
	}
	action := th.actionOf(ev)
	if action == "" {
		return nil, "", &Nonconformance{Holder: h.name, Reason: "maps to no spec action"}
	}
	return h, action, nil
}

// actionOf maps a run-subject or release event to its action.
func (th *threadTrace) actionOf(ev *eventspb.Event) string {
	switch ev.GetBody().(type) {
	case *eventspb.Event_ThreadReleased:
		return "Release"
	case *eventspb.Event_RunStarted:
		return "RunStart"
	case *eventspb.Event_RequestOpened:
		return "Ask"
	case *eventspb.Event_AnswerGiven:
		return "Reply"
	case *eventspb.Event_SteeringGiven:
		return "Steer"
	case *eventspb.Event_RunCompleted, *eventspb.Event_RunFailed:
		return "RunEnd"
	case *eventspb.Event_RunOutput:
		return "Output" // RUNFENCE only: step maps it so
	case *eventspb.Event_RunAbandoned:
		// Abandon abandons the active run; with none, the run it planned to
		// abandon ended first, and the write changes nothing. Which run it
		// names is the rules' (AbandonOnlyOlder).
		return "Abandon"
	}
	return ""
}

// visible reports whether a transition of action writes an event: the
// branches that write nothing are hidden steps.
func visible(action string, from, to ThreadState) bool {
	switch action {
	case "Post", "PostIdle", "Abandon", "RunStart", "Ask", "Reply", "Steer", "Output":
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
	m, _ := v.model(th)
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
		for _, a := range m.Actions {
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
	m, _ := v.model(th)
	var next []ThreadState
	seen := make(map[ThreadState]struct{})
	for _, s := range v.closure(th, newcomer) {
		for _, a := range m.Actions {
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
	m, _ := v.model(th)
	free := slices.Index(th.slots[:], nil)
	for _, s := range v.closure(th, free) {
		for _, a := range m.Actions {
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
	// The rules accepted the event: the model consumes the oldest pending
	// message; the folds consume the one it names, and keep the older ones
	// pending. The count is the same.
	consume := func(seq uint64) {
		if i := slices.Index(th.pending, seq); i > 0 {
			th.pending = slices.Delete(th.pending, i, i+1)
		} else if len(th.pending) > 0 {
			th.pending = th.pending[1:]
		}
	}
	switch b := ev.GetBody().(type) {
	case *eventspb.Event_ThreadClaimed:
		h.marker = env.Seq
		th.holders[h.marker], th.slots[h.slot] = h, h
		th.newest, th.released = env.Seq, false
	case *eventspb.Event_ThreadReleased:
		th.released = true
	case *eventspb.Event_RunStarted:
		consume(b.RunStarted.GetPromptSeq())
		h.run = b.RunStarted.GetRunId()
		// RunStart opened run NRuns + 1, the same in every state.
		th.runIdx[h.run] = uint8(tcl{traceConfig()}.nRuns(th.frontier[0]))
	case *eventspb.Event_AnswerGiven:
		consume(b.AnswerGiven.GetMessageSeq())
	case *eventspb.Event_SteeringGiven:
		consume(b.SteeringGiven.GetMessageSeq())
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
	delete(th.retired, h.marker)
	h.slot = p
	th.holders[h.marker], th.slots[p] = h, h
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
		delete(th.holders, h.marker)
		h.slot = -1
		th.retired[h.marker] = h
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
