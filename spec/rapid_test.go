package spec_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"pgregory.net/rapid"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/audit"
	"github.com/artifactr/artifactr/spec"
)

// The rapid test links ThreadClaimLapse.tla to the code: it drives the real
// stores through random sequences of the spec's actions, carried out as the
// code carries them out (events.AcquireClaim, fenced appends, compare-and-
// set run ends), and after every step replays the log and checks the spec's
// invariants on it. The action names are the spec's; StartFenced and
// ReplyFenced are the outcomes of RunStart, Abandon and Reply when the
// fence refuses them.

// pc is where a claimant is in its turn: pc[p] in the .tla.
type pc string

const (
	pcIdle    pc = "idle"
	pcAbandon pc = "abandon"
	pcPlanned pc = "planned"
	pcRunning pc = "running"
	pcReplied pc = "replied"
	pcHolding pc = "holding"
)

// numProcs is the number of claimants, p1..p3.
const numProcs = 3

// claimant is one process of the spec, with its own store handle and clock.
type claimant struct {
	name  string
	store events.Store
	clock *eventstest.Clock
	n     int // claims made: names holders

	pc    pc
	claim events.Claim
	// plan is the message the claimant's plan starts a run on: the oldest
	// untaken message as it read the log at Claim. It is kept, however the
	// log moves after: the stale plan of ADR-0069.
	plan uint64
	seen uint64 // seen[p]: taken as read at Claim, moved by its own writes
	// The run an older claim left active, to abandon.
	abandonRun   string
	abandonClaim uint64
	run          string
	runSeq       uint64   // the run subject's last seq as it knows it: its CAS token
	open         []string // its run's requests not yet answered
	reqs         int
}

// drop is Drop(p): the claimant lets the thread go (I4).
func (c *claimant) drop() {
	c.pc, c.claim, c.plan, c.seen = pcIdle, events.Claim{}, 0, 0
	c.abandonRun, c.abandonClaim, c.run, c.runSeq, c.open = "", 0, "", 0, nil
}

// backend opens the store handles of one rapid iteration, one per claimant,
// each reading its clock, and a handle to read the log back with.
type backend struct {
	name string
	open func(clocks []*eventstest.Clock) (procs []events.Store, reader events.Store)
	// seen counts the outcomes of actions over every iteration, so a test
	// can show that the refusals were exercised.
	seen map[string]int
}

var threadN atomic.Uint64

// machine is one iteration: a fresh thread, numProcs claimants.
type machine struct {
	seen     map[string]int // the backend's outcome counts
	ctx      context.Context
	thread   string
	unfenced bool
	procs    []*claimant
	reader   events.Store
	posted   []uint64 // posted message sequences, in order
	steps    []string
}

func newMachine(t *rapid.T, b backend, unfenced bool) *machine {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	m := &machine{seen: b.seen, ctx: ctx, thread: fmt.Sprintf("rapid-%d", threadN.Add(1)), unfenced: unfenced}
	clocks := make([]*eventstest.Clock, numProcs)
	for i := range clocks {
		clocks[i] = eventstest.NewClock(0)
	}
	stores, reader := b.open(clocks)
	m.reader = reader
	for i, s := range stores {
		if unfenced {
			s = eventstest.Unfenced(s)
		}
		m.procs = append(m.procs, &claimant{name: fmt.Sprintf("p%d", i+1), store: s, clock: clocks[i], pc: pcIdle})
	}
	return m
}

func (m *machine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"Post":        m.Post,
		"Claim":       m.Claim,
		"Lapse":       m.Lapse,
		"Renew":       m.Renew,
		"Release":     m.Release,
		"Abandon":     m.Abandon,
		"RunStart":    m.RunStart,
		"OpenRequest": m.OpenRequest,
		"Reply":       m.Reply,
		"RunEnd":      m.RunEnd,
		"":            m.Check,
	}
}

func (m *machine) logf(format string, args ...any) {
	m.steps = append(m.steps, fmt.Sprintf("%2d. ", len(m.steps)+1)+fmt.Sprintf(format, args...))
}

// pick draws a claimant for which ok holds, or skips the action. The
// draw is the claimant's index: p1 is 0.
func (m *machine) pick(t *rapid.T, ok func(*claimant) bool) *claimant {
	var can []int
	for i, c := range m.procs {
		if ok(c) {
			can = append(can, i)
		}
	}
	if len(can) == 0 {
		t.SkipNow() // no claimant can: rapid draws another action
	}
	return m.procs[rapid.SampledFrom(can).Draw(t, "p")]
}

// unexpected fails t on an error the protocol does not expect.
func (m *machine) unexpected(t *rapid.T, what string, err error) {
	t.Fatalf("%s: unexpected error: %v\nsteps:\n%s", what, err, strings.Join(m.steps, "\n"))
}

// Post posts a message (not a spec action: the spec's messages are posted
// from the start).
func (m *machine) Post(t *rapid.T) {
	ack, err := m.procs[0].store.Post(m.ctx, m.thread, &eventspb.MessagePosted{MessageId: fmt.Sprint(len(m.posted) + 1), Text: "m"})
	if err != nil {
		m.unexpected(t, "Post", err)
	}
	m.posted = append(m.posted, ack.Seq)
	m.logf("Post -> message %d", ack.Seq)
}

// Claim is Claim(p): events.AcquireClaim, then the plan, made on the log as
// the claim read it: abandon a run an older claim left, then start a run on
// the oldest untaken message, or hold the thread with nothing to do.
func (m *machine) Claim(t *rapid.T) {
	c := m.pick(t, func(c *claimant) bool { return c.pc == pcIdle })
	c.n++
	holder := fmt.Sprintf("%s/%d", c.name, c.n)
	cl, hist, err := events.AcquireClaim(m.ctx, c.store, m.thread, holder, eventstest.TTL, c.clock.Now())
	if errors.Is(err, events.ErrThreadBusy) {
		m.seen["Claim busy"]++
		m.logf("Claim(%s) -> lease busy", c.name)
		return
	}
	if err != nil {
		m.unexpected(t, "Claim", err)
	}
	view := projections.Fold(m.thread, hist)
	c.claim, c.seen, c.runSeq = cl, view.Taken, view.LastRunSubjectSeq
	c.plan = 0
	if msg, ok := view.OldestPending(); ok {
		c.plan = msg.Seq
	}
	c.pc = planOf(c.plan)
	m.seen["Claim"]++
	if r := view.ActiveRun; r != nil {
		c.pc, c.abandonRun, c.abandonClaim = pcAbandon, r.ID, r.ClaimSeq
	}
	m.logf("Claim(%s) -> %s claim_seq %d, plan message %d, then %s", c.name, holder, cl.Seq, c.plan, c.pc)
}

// planOf is Plan(t): a run on the planned message, or hold.
func planOf(plan uint64) pc {
	if plan != 0 {
		return pcPlanned
	}
	return pcHolding
}

// Lapse is Lapse: the lease lapses under its live holder. expire: time
// passes for every process past the TTL; steal: one process's clock jumps
// ahead of the others (skew), so it sees the lease lapsed.
func (m *machine) Lapse(t *rapid.T) {
	if rapid.Bool().Draw(t, "steal") {
		c := m.procs[rapid.IntRange(0, len(m.procs)-1).Draw(t, "p")]
		c.clock.Advance(2 * eventstest.TTL)
		m.logf("Lapse(steal: %s's clock jumps past the TTL)", c.name)
		return
	}
	for _, c := range m.procs {
		c.clock.Advance(2 * eventstest.TTL)
	}
	m.logf("Lapse(expire: every clock passes the TTL)")
}

// Renew is Renew(p): compare-and-set on the lease's revision. A lost lease
// changes nothing here: safety must not rest on noticing it.
func (m *machine) Renew(t *rapid.T) {
	c := m.pick(t, func(c *claimant) bool { return c.pc != pcIdle })
	l, err := c.store.RenewLease(m.ctx, c.claim.Lease)
	switch {
	case err == nil:
		c.claim.Lease = l
		m.logf("Renew(%s) -> ok", c.name)
	case errors.Is(err, events.ErrLeaseLost):
		m.seen["Renew lost"]++
		m.logf("Renew(%s) -> lease lost", c.name)
	default:
		m.unexpected(t, "Renew", err)
	}
}

// Release is Release(p): events.ReleaseClaim; refused, it writes nothing.
// Either way p lets go.
func (m *machine) Release(t *rapid.T) {
	c := m.pick(t, func(c *claimant) bool { return c.pc == pcHolding })
	if err := events.ReleaseClaim(m.ctx, c.store, c.claim, "done", c.clock.Now()); err != nil {
		m.unexpected(t, "Release", err)
	}
	m.logf("Release(%s) claim %d", c.name, c.claim.Seq)
	c.drop()
}

// fenced appends ev with the claimant's fence. It returns false, after
// dropping the claimant, when the fence refused it (StartFenced or
// ReplyFenced).
func (m *machine) fenced(t *rapid.T, c *claimant, action, refusal string, ev *eventspb.Event) (uint64, bool) {
	ack, err := c.store.Append(m.ctx, ev, events.Fenced(c.claim))
	if errors.Is(err, events.ErrThreadBusy) {
		m.seen[refusal]++
		m.logf("%s(%s) %s -> refused by the fence: %s", action, c.name, what(ev), refusal)
		c.drop()
		return 0, false
	}
	if err != nil {
		m.unexpected(t, action, err)
	}
	m.seen[action]++
	m.logf("%s(%s) %s -> seq %d", action, c.name, what(ev), ack.Seq)
	return ack.Seq, true
}

// Abandon is Abandon(p): run_abandoned, fenced, then the plan.
func (m *machine) Abandon(t *rapid.T) {
	c := m.pick(t, func(c *claimant) bool { return c.pc == pcAbandon })
	ev := events.NewRunAbandoned(c.claim, c.clock.Now(), c.abandonRun, c.abandonClaim, "taken over")
	if seq, ok := m.fenced(t, c, "Abandon", "StartFenced", ev); ok {
		c.runSeq, c.pc = seq, planOf(c.plan)
	}
}

// RunStart is RunStart(p): run_started, fenced, on the planned message.
func (m *machine) RunStart(t *rapid.T) {
	c := m.pick(t, func(c *claimant) bool { return c.pc == pcPlanned })
	run := fmt.Sprintf("%s-run", c.claim.Holder)
	ev := events.NewRunStarted(c.claim, c.clock.Now(), run, c.plan, "rapid")
	if seq, ok := m.fenced(t, c, "RunStart", "StartFenced", ev); ok {
		c.run, c.runSeq, c.seen, c.pc = run, seq, c.plan, pcRunning
	}
}

// OpenRequest is the run asking a question: request_opened, compare-and-set
// on the run subject (the spec's run has its one request from the start).
func (m *machine) OpenRequest(t *rapid.T) {
	c := m.pick(t, running)
	c.reqs++
	req := fmt.Sprintf("%s/q%d", c.run, c.reqs)
	ev := events.NewRequestOpened(c.claim, c.clock.Now(), c.run, req, "?")
	if seq, ok := m.runSubject(t, c, "OpenRequest", ev); ok {
		c.open = append(c.open, req)
		c.runSeq = seq
	}
}

func running(c *claimant) bool { return c.pc == pcRunning || c.pc == pcReplied }

// Reply is Reply(p): answer_given, fenced, for an open request of its run,
// with the next message after the one it last consumed, as it knows the log.
func (m *machine) Reply(t *rapid.T) {
	c := m.pick(t, func(c *claimant) bool { return running(c) && len(c.open) > 0 && m.after(c.seen) != 0 })
	msg := m.after(c.seen)
	ev := events.NewAnswerGiven(c.claim, c.clock.Now(), c.run, c.open[0], msg)
	if seq, ok := m.fenced(t, c, "Reply", "ReplyFenced", ev); ok {
		c.open, c.seen, c.runSeq, c.pc = c.open[1:], msg, seq, pcReplied
	}
}

// after returns the first posted message after seq, or 0.
func (m *machine) after(seq uint64) uint64 {
	for _, s := range m.posted {
		if s > seq {
			return s
		}
	}
	return 0
}

// RunEnd is RunEnd(p): run_completed or run_failed, compare-and-set on the
// run subject. Refused once the run was abandoned; p then lets go.
func (m *machine) RunEnd(t *rapid.T) {
	c := m.pick(t, running)
	ev := events.NewRunCompleted(c.claim, c.clock.Now(), c.run, "ok")
	if rapid.Bool().Draw(t, "failed") {
		ev = events.NewRunFailed(c.claim, c.clock.Now(), c.run, "agent failed")
	}
	if _, ok := m.runSubject(t, c, "RunEnd", ev); ok {
		c.pc, c.run, c.open = pcHolding, "", nil
	}
}

// runSubject appends ev with a compare-and-set on the run subject. On a
// conflict the claimant reads the log: if its run is still active it takes
// the new sequence as its token (the core's Sync), otherwise it lets go.
func (m *machine) runSubject(t *rapid.T, c *claimant, action string, ev *eventspb.Event) (uint64, bool) {
	ack, err := c.store.Append(m.ctx, ev, events.ExpectLast(c.runSeq))
	if err == nil {
		m.seen[action]++
		m.logf("%s(%s) %s -> seq %d", action, c.name, what(ev), ack.Seq)
		return ack.Seq, true
	}
	if !errors.Is(err, events.ErrConflict) {
		m.unexpected(t, action, err)
	}
	view := projections.Fold(m.thread, m.load(t))
	if r := view.ActiveRun; r != nil && r.ID == c.run {
		c.runSeq = view.LastRunSubjectSeq
		m.seen[action+" conflict, resynced"]++
		m.logf("%s(%s) %s -> conflict; its run is active, resynced to %d", action, c.name, what(ev), c.runSeq)
		return 0, false
	}
	m.seen[action+" refused, lets go"]++
	m.logf("%s(%s) %s -> conflict; its run is not active: lets go", action, c.name, what(ev))
	c.drop()
	return 0, false
}

func (m *machine) load(t *rapid.T) []events.Envelope {
	envs, err := m.reader.Load(m.ctx, m.thread, 1)
	if err != nil {
		m.unexpected(t, "Load", err)
	}
	return envs
}

// Check replays the log after every step and checks the spec's invariants
// on it, through the audit and directly. With the fence every audit check
// must hold; without it only I1 and I3 count, since FenceNewestClaim fails
// at the first unfenced write whatever happens next.
func (m *machine) Check(t *rapid.T) {
	envs := m.load(t)
	a := audit.New()
	for _, e := range envs {
		a.Add(e)
	}
	var broken []string
	for _, v := range a.Report().Violations {
		if !m.unfenced || v.Check == audit.CheckI1 || v.Check == audit.CheckI3 {
			broken = append(broken, fmt.Sprintf("audit %s: seqs %v: %s", v.Check, v.Seqs, v.Message))
		}
	}
	broken = append(broken, invariants(envs)...)
	if !m.unfenced {
		// The log, written by the real stores, must be a behaviour of the
		// model (spec.TraceValidator, artifactr audit --spec).
		v := spec.NewTraceValidator()
		for _, e := range envs {
			v.Add(e)
		}
		for _, n := range v.Report().Nonconforming {
			broken = append(broken, "audit TraceConforms: "+n.String())
		}
	}
	if len(broken) == 0 {
		return
	}
	t.Logf("after step %d:\n%s\nsteps:\n%s", len(m.steps), strings.Join(broken, "\n"), strings.Join(m.steps, "\n"))
	// The failure names only the broken checks: rapid shrinks to a shorter
	// sequence only if it fails with the same message, and sequences
	// differ between iterations on the JetStream store.
	var names []string
	for _, b := range broken {
		name, _, _ := strings.Cut(strings.TrimPrefix(b, "audit "), ":")
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	t.Fatalf("broken: %s", strings.Join(names, ", "))
}

// invariants checks I1_ConsumedAtMostOnce and I3_OneActiveRun on the log
// directly, as the .tla states them: consumed[m] <= 1 for every message,
// and at most one run in the set of active runs.
func invariants(envs []events.Envelope) []string {
	var broken []string
	consumedBy := make(map[uint64]uint64) // message -> the event that consumed it
	var active []string                   // runs started and not ended, in start order
	consume := func(msg, at uint64) {
		if first, ok := consumedBy[msg]; ok {
			broken = append(broken, fmt.Sprintf("I1_ConsumedAtMostOnce: message %d consumed at %d and again at %d", msg, first, at))
			return
		}
		consumedBy[msg] = at
	}
	end := func(run string) {
		for i, r := range active {
			if r == run {
				active = append(active[:i], active[i+1:]...)
				return
			}
		}
	}
	for _, e := range envs {
		switch b := e.Event.GetBody().(type) {
		case *eventspb.Event_RunStarted:
			consume(b.RunStarted.GetPromptSeq(), e.Seq)
			active = append(active, b.RunStarted.GetRunId())
			if len(active) > 1 {
				broken = append(broken, fmt.Sprintf("I3_OneActiveRun: runs %v active after %d", active, e.Seq))
			}
		case *eventspb.Event_AnswerGiven:
			consume(b.AnswerGiven.GetMessageSeq(), e.Seq)
		case *eventspb.Event_SteeringGiven:
			consume(b.SteeringGiven.GetMessageSeq(), e.Seq)
		case *eventspb.Event_RunCompleted:
			end(b.RunCompleted.GetRunId())
		case *eventspb.Event_RunFailed:
			end(b.RunFailed.GetRunId())
		case *eventspb.Event_RunAbandoned:
			end(b.RunAbandoned.GetRunId())
		}
	}
	return broken
}

// what names an appended event for the step list.
func what(ev *eventspb.Event) string {
	switch b := ev.GetBody().(type) {
	case *eventspb.Event_RunStarted:
		return fmt.Sprintf("run_started %s prompt %d", b.RunStarted.GetRunId(), b.RunStarted.GetPromptSeq())
	case *eventspb.Event_AnswerGiven:
		return fmt.Sprintf("answer_given %s message %d", b.AnswerGiven.GetRequestId(), b.AnswerGiven.GetMessageSeq())
	case *eventspb.Event_RunAbandoned:
		return fmt.Sprintf("run_abandoned %s", b.RunAbandoned.GetRunId())
	case *eventspb.Event_RequestOpened:
		return "request_opened " + b.RequestOpened.GetRequestId()
	}
	return string(events.TypeOf(ev))
}
