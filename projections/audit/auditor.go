package audit

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections"
)

// DefaultMaxFindings is the default of Options.MaxFindings.
const DefaultMaxFindings = 10_000

// Options configure an [Auditor].
type Options struct {
	// Subjects names the stream's subjects; the fence check compares a fenced
	// event's expected-subject header with its thread's claim subject (its
	// run subject when the thread's markers are there: RUNFENCE).
	Subjects events.Subjects
	// KnownLayout says that Subjects.RunFence is the stream's recorded fence
	// layout (natsstore reads it from the stream's metadata): every
	// thread's markers belong on the subject it names, and a marker on the
	// other one is the violation, even a thread's first. Without it a
	// thread's first marker fixes the thread's layout, so a forged first
	// marker on the wrong subject would put the violation on the honest
	// marker after it.
	KnownLayout bool
	// MaxFindings bounds how many violations, and separately how many
	// anomalies, a report lists, so that auditing a badly broken log of
	// millions of events stays in bounded memory. The counts stay exact.
	// 0 means DefaultMaxFindings; negative means no bound.
	MaxFindings int
	// StrandedAfter, when positive, makes the report warn of stranded
	// threads: with a message pending, no active run and no claim (never
	// claimed, or its newest claim released) for longer than it by Now, as
	// of the last event audited. Runners promise to consume a post within
	// runner.ConsumeBound; pass that. A warning is no violation.
	StrandedAfter time.Duration
	// Now is the clock stranded threads are judged by. Default time.Now.
	Now func() time.Time
	// OnViolation and OnAnomaly, when set, see each violation and anomaly
	// as it is found, past MaxFindings too. The spec's trace validator
	// (spec/trace.go) takes the audit's verdict on each event from them,
	// so that the two share one rule set.
	OnViolation func(Violation)
	OnAnomaly   func(Finding)
}

// Auditor checks a log's events against the spec's invariants as they stream
// by. Feed it envelopes in stream order with [Auditor.Add], any mix of
// threads, then call [Auditor.Report]. It is not safe for concurrent use.
//
// Its state per thread is only what the checks need: posted message
// sequences with the sequence that consumed each, the newest claim, the last
// claim-subject sequence, the active run, the newest run, abandoned run ids
// and requests. It keeps no texts.
type Auditor struct {
	opts    Options
	prefix  string // the subject prefix, for the fence's expected subject
	seed    maphash.Seed
	threads map[uint64]*thread // by hash of the id; see thread.collide
	last    *thread            // the previous event's thread: streams come in runs
	env     events.Envelope    // the envelope Add audits

	events            int
	firstSeq, lastSeq uint64
	// chainBroken is set when the claim event being audited broke
	// ClaimChain: the fold's objection to the same release is then an
	// anomaly, so that one forged release is one violation.
	chainBroken bool
	// abandonBroken is set when the run_abandoned being audited broke
	// AbandonOnlyOlder by its own claim: the fold's objection to its
	// started claim is then not reported again.
	abandonBroken bool
	checked       [numChecks]int

	violations     []Violation
	anomalies      []Finding
	nViolations    int
	nAnomalies     int
	threadsWithIDs int
}

// New returns an Auditor for the default subject prefix.
func New() *Auditor { return NewWithOptions(Options{}) }

// NewWithOptions returns an Auditor configured by o.
func NewWithOptions(o Options) *Auditor {
	if o.MaxFindings == 0 {
		o.MaxFindings = DefaultMaxFindings
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Auditor{
		opts:    o,
		prefix:  cmp.Or(o.Subjects.Prefix, events.DefaultPrefix),
		seed:    maphash.MakeSeed(),
		threads: make(map[uint64]*thread),
	}
}

// thread is one thread's audit state. Strings it compares on every event
// are [short], so the comparison touches only this struct; the fields are
// ordered so that an event touches as few cache lines as it can: on a long
// log of many threads, this state is cold and each line is a miss.
type thread struct {
	// 0-63: every event
	key           short  // the id, for lookups
	lastSeq       uint64 // last sequence audited
	lastClaimSubj uint64 // last sequence on the claim subject, whatever its payload
	claimSeq      uint64 // newest thread_claimed
	lastRunSubj   uint64 // last sequence on the run subject, whatever its payload

	// 64-127: claims, runs, consumption
	releaseSeq  uint64    // its thread_released, 0 while held
	activeStart uint64    // the active run's run_started
	activeClaim uint64    // the claim it started under
	taken       uint64    // the taken cursor: the end of the consumed prefix
	next        int       // index of the first message after taken: the oldest pending
	msgs        []message // posted messages, in sequence order

	// 128-191: fenced events
	holder    short // the newest claim's holder
	hasActive bool
	forked    bool // its first event was a thread_forked
	// layout is set by the thread's first marker: its markers are on the
	// claim subject, or on the run subject (RUNFENCE), where every holder
	// write is a compare-and-set on the run subject.
	layoutSet bool
	runFence  bool
	collide   *thread          // next thread whose id has the same hash
	abandoned map[short]uint64 // run id -> its run_abandoned

	// 192-: run events
	activeID     short
	activeHolder short             // the holder that started the active run
	lastRun      short             // the newest run
	requests     map[short]request // by id; the newest request of each id
	id           string            // the id, for reports
	lastEnd      uint64            // the newest run's end, 0 while active
	lastStat     runStatus         // the newest run's status, 0 before the first run
	// unclaimedSince is the stored time (unix ns) of the event since which
	// the thread has had a message pending, no active run and no claim; 0
	// while it has not.
	unclaimedSince int64

	strat strategyState // strategy.go
	ids   *idState      // message ids; nil before the first post
}

// idState is what the audit keeps of a thread's message ids, for the rule
// that an id is one message forever.
type idState struct {
	first   map[short]uint64  // message id -> the message posted with it
	reposts map[uint64]uint64 // a repost's seq -> the message with its id
}

// runStatus is a projections.RunStatus in a byte.
type runStatus uint8

var runStatuses = [...]projections.RunStatus{"", projections.RunActive, projections.RunCompleted, projections.RunFailed, projections.RunAbandoned}

func toRunStatus(s projections.RunStatus) runStatus {
	for i, v := range runStatuses {
		if v == s {
			return runStatus(i)
		}
	}
	return 0
}

type message struct {
	seq uint64
	by  uint64 // the consuming event, 0 while pending
}

// request is a request_opened. It names its run by the run's start: the
// fold rules see only the active run's requests, and the audit keeps the
// others to tell an answer given twice (Spec: AnswerOnce).
type request struct {
	run      uint64 // its run's run_started
	opened   uint64 // its request_opened
	answered uint64 // its accepted answer_given, 0 while open
}

// Add audits env, the next envelope of the stream.
func (a *Auditor) Add(env events.Envelope) {
	// The rules take the envelope through an interface, which would move a
	// local copy to the heap on every event; the Auditor's own is there.
	a.env = env
	a.add(&a.env)
}

func (a *Auditor) add(env *events.Envelope) {
	a.events++
	if a.events == 1 || env.Seq < a.firstSeq {
		a.firstSeq = env.Seq
	}
	a.lastSeq = max(a.lastSeq, env.Seq)
	th := a.thread(env.Thread)
	if env.Seq <= th.lastSeq || env.Seq == 0 {
		a.anomalyIgnored(th, env, true, fmt.Sprintf("sequence %d does not follow %d: the stream is out of order or repeats", env.Seq, th.lastSeq))
		return
	}
	th.lastSeq = env.Seq
	prevClaimSubj, prevRunSubj := th.lastClaimSubj, th.lastRunSubj
	f := (*auditFold)(a) // th is a.last, the thread f folds
	typ, ok := projections.Admit(f, env)
	if !ok {
		return
	}
	env.Type = typ // the messages name it; a hand-made envelope may not
	a.check(th, env, typ, prevClaimSubj, prevRunSubj)
	projections.Rules(f, env, typ)
	switch {
	case !th.unclaimed():
		th.unclaimedSince = 0
	case th.unclaimedSince == 0:
		th.unclaimedSince = max(env.Stored.UnixNano(), 1)
	}
}

// unclaimed reports whether th has a message pending, no active run and no
// claim: nobody is working on it, so a runner must come and claim it.
func (th *thread) unclaimed() bool {
	return th.next < len(th.msgs) && !th.hasActive && (th.claimSeq == 0 || th.releaseSeq != 0)
}

// check runs the audit's own checks of how env was appended, which are not
// the fold's business, and counts the spec's checks the fold rules make on
// it. prevClaimSubj and prevRunSubj are the claim and run subjects' last
// sequences before env.
func (a *Auditor) check(th *thread, env *events.Envelope, typ events.Type, prevClaimSubj, prevRunSubj uint64) {
	a.countNoneSkipped(env) // skip.go
	// A type switch on the body is cheaper than comparing type names; a
	// type it does not name is checked by its kind and fence below.
	switch env.Event.GetBody().(type) {
	case *eventspb.Event_MessagePosted:
		a.rejectOnlyIdle(th, env)
		return
	case *eventspb.Event_ThreadClaimed:
		a.claimChain(th, env, prevClaimSubj, prevRunSubj)
		return
	case *eventspb.Event_ThreadReleased:
		a.checked[checkReleaseByHolder]++
		a.claimChain(th, env, prevClaimSubj, prevRunSubj)
		return
	case *eventspb.Event_RunStarted:
		a.checked[checkI3]++
		a.checked[checkI1]++
		a.fence(th, env, prevRunSubj)
		return
	case *eventspb.Event_AnswerGiven:
		a.checked[checkAnswerOnce]++
		a.checked[checkGivenToActive]++
		a.checked[checkI1]++
		a.fence(th, env, prevRunSubj)
		return
	case *eventspb.Event_SteeringGiven:
		a.checked[checkGivenToActive]++
		a.checked[checkI1]++
		a.fence(th, env, prevRunSubj)
		return
	case *eventspb.Event_RunAbandoned:
		a.fence(th, env, prevRunSubj)
		a.abandonOlder(th, env)
		return
	case *eventspb.Event_ThreadForked:
		a.forkAppend(th, env)
		return
	case *eventspb.Event_RunOutput, *eventspb.Event_RequestOpened, *eventspb.Event_RunCompleted, *eventspb.Event_RunFailed,
		*eventspb.Event_RunInterrupted:
		a.checked[checkNoEndAfterAbandon]++
		a.checked[checkRunByHolder]++
		a.runChain(th, env, prevRunSubj)
		return
	}
	switch {
	case typ.Fenced():
		a.fence(th, env, prevRunSubj)
	case typ.Kind() == events.KindClaim:
		a.claimChain(th, env, prevClaimSubj, prevRunSubj)
	case typ.Kind() == events.KindRun:
		a.checked[checkNoEndAfterAbandon]++
		a.runChain(th, env, prevRunSubj)
	}
}

// thread returns id's state. It keys the map by a hash of the id, rather
// than the id, and compares the inline key: a string-keyed map would compare
// the stored key's bytes, one more cache miss per event.
func (a *Auditor) thread(id string) *thread {
	if a.last != nil && a.last.key.eq(id) {
		return a.last
	}
	h := maphash.String(a.seed, id)
	first := a.threads[h]
	for th := first; th != nil; th = th.collide {
		if th.key.eq(id) {
			a.last = th
			return th
		}
	}
	th := &thread{id: id, collide: first}
	th.key.set(id)
	a.threads[h] = th
	if id != "" {
		a.threadsWithIDs++
	}
	a.last = th
	return th
}

// isClaimSubject reports whether subject is thread's claim subject,
// "<prefix>.<thread>.claim" ("<prefix>.<p>.<thread>.claim" with
// partitions), without building that string.
func (a *Auditor) isClaimSubject(subject, thread string) bool {
	return a.isSubject(subject, thread, ".claim")
}

// isRunSubject is isClaimSubject for the run subject.
func (a *Auditor) isRunSubject(subject, thread string) bool {
	return a.isSubject(subject, thread, ".run")
}

func (a *Auditor) isSubject(subject, thread, kind string) bool {
	p := a.prefix
	if a.opts.Subjects.Partitioned() {
		p += "." + strconv.Itoa(a.opts.Subjects.PartitionOf(thread))
	}
	rest, ok := strings.CutPrefix(subject, p)
	if !ok || len(rest) != 1+len(thread)+len(kind) || rest[0] != '.' {
		return false
	}
	return rest[1:1+len(thread)] == thread && rest[1+len(thread):] == kind
}

func (a *Auditor) claimSubject(thread string) string {
	return a.opts.Subjects.Thread(thread, events.KindClaim)
}

// Spec: ClaimChain. prevClaim and prevRun are the claim and run subjects'
// last sequences before env. A marker on the claim subject expects the
// claim subject's last sequence; one on the run subject (RUNFENCE) the run
// subject's, which holder writes move too. The thread's first marker fixes
// its layout: a marker on the other subject is a writer of the other
// protocol, and the two layouts together break I1 (spec README, "The
// migration").
func (a *Auditor) claimChain(th *thread, env *events.Envelope, prevClaim, prevRun uint64) {
	a.checked[checkClaimChain]++
	a.chainBroken = false
	onRun := projections.SubjectKind(env, env.Type) == events.KindRun
	if !th.layoutSet {
		th.layoutSet, th.runFence = true, onRun
		if a.opts.KnownLayout {
			th.runFence = a.opts.Subjects.RunFence
		}
	}
	prev, subj, isSubj := prevClaim, "claim", a.isClaimSubject
	if onRun {
		prev, subj, isSubj = prevRun, "run", a.isRunSubject
	}
	var msg string
	switch {
	case onRun != th.runFence:
		layout := "claim"
		if th.runFence {
			layout = "run"
		}
		msg = fmt.Sprintf("%s at %d is on the %s subject, but this thread's markers are on the %s subject: writers of both protocols share the stream",
			env.Type, env.Seq, subj, layout)
	case env.ExpectSeq == prev && (env.ExpectSubject == "" || isSubj(env.ExpectSubject, env.Thread)):
		return
	default:
		msg = fmt.Sprintf("%s at %d expected sequence %d on %s, but the %s subject's last sequence was %d",
			env.Type, env.Seq, env.ExpectSeq, orOwn(env.ExpectSubject), subj, prev)
	}
	a.chainBroken = true
	a.violation(checkClaimChain, th, seqs(prev, env.Seq), msg)
}

// Spec: RunChain (DESIGN §3: run_output, request_opened, run_completed and
// run_failed are a compare-and-set on the run subject). JetStream refuses a
// check that does not hold, so a stored event either expects exactly the
// run subject's previous sequence or carries no check on it at all; the
// latter is no holder's write. A run event always follows its run_started
// on the same subject, so the expected sequence is never 0 and a missing
// header (read as 0) is told apart.
//
// Under RUNFENCE a marker moves the run subject too, so a holder's write
// lands only while its marker is the newest and not released: a holder
// that read a newer marker stops (I4), and one that did not is refused.
func (a *Auditor) runChain(th *thread, env *events.Envelope, prev uint64) {
	a.checked[checkRunChain]++
	if cs := env.Event.GetClaimSeq(); th.runFence && (cs != th.claimSeq || th.releaseSeq != 0) {
		why := fmt.Sprintf("the newest marker on the run subject is %d", th.claimSeq)
		if cs == th.claimSeq {
			why = fmt.Sprintf("it was released at %d", th.releaseSeq)
		}
		a.violation(checkRunChain, th, seqs(th.claimSeq, th.releaseSeq, env.Seq), fmt.Sprintf(
			"%s at %d was written under claim %d, but %s: with markers on the run subject no write of an older or released claim lands",
			env.Type, env.Seq, cs, why))
		return
	}
	if prev != 0 && env.ExpectSeq == prev && (env.ExpectSubject == "" || env.ExpectSubject == a.runSubject(env.Thread)) {
		return
	}
	what := fmt.Sprintf("expected sequence %d on %s", env.ExpectSeq, orOwn(env.ExpectSubject))
	if env.ExpectSeq == 0 && env.ExpectSubject == "" {
		what = "no check"
	}
	a.violation(checkRunChain, th, seqs(prev, env.Seq), fmt.Sprintf(
		"%s at %d was appended with %s, but a run event must be a compare-and-set on its run subject, whose last sequence was %d",
		env.Type, env.Seq, what, prev))
}

func (a *Auditor) runSubject(thread string) string {
	return a.opts.Subjects.Thread(thread, events.KindRun)
}

// Spec: FenceNewestClaim (DESIGN §3: RunStart and Reply are fenced). prevRun
// is the run subject's last sequence before env: under RUNFENCE the fence
// is a compare-and-set on it (the RunChain shape), and the claim-subject
// fence is an old-protocol writer's.
func (a *Auditor) fence(th *thread, env *events.Envelope, prevRun uint64) {
	a.checked[checkFence]++
	ev := env.Event
	cs := ev.GetClaimSeq()
	var msg string
	switch {
	case th.claimSeq == 0:
		a.violation(checkFence, th, seqs(env.Seq), fmt.Sprintf("%s at %d has claim_seq %d, but no claim marker precedes it", env.Type, env.Seq, cs))
		return
	case cs != th.claimSeq:
		msg = fmt.Sprintf("%s at %d has claim_seq %d, but the newest claim marker is %d", env.Type, env.Seq, cs, th.claimSeq)
	case th.releaseSeq != 0:
		a.violation(checkFence, th, seqs(th.claimSeq, th.releaseSeq, env.Seq), fmt.Sprintf(
			"%s at %d is fenced by claim %d, which was released at %d", env.Type, env.Seq, cs, th.releaseSeq))
		return
	case !th.holder.eq(ev.GetHolder()):
		msg = fmt.Sprintf("%s at %d names holder %q, but claim %d is held by %q", env.Type, env.Seq, ev.GetHolder(), cs, th.holder.String())
	case th.runFence:
		if prevRun != 0 && env.ExpectSeq == prevRun && (env.ExpectSubject == "" || a.isRunSubject(env.ExpectSubject, env.Thread)) {
			return
		}
		msg = fmt.Sprintf("%s at %d was appended expecting sequence %d on %s, but this thread's claims are on the run subject, whose last sequence was %d",
			env.Type, env.Seq, env.ExpectSeq, orOwn(env.ExpectSubject), prevRun)
		if a.isClaimSubject(env.ExpectSubject, env.Thread) {
			msg += ": the claim-subject fence of an old-protocol writer"
		}
	case env.ExpectSeq != cs || !a.isClaimSubject(env.ExpectSubject, env.Thread):
		msg = fmt.Sprintf("%s at %d was appended expecting sequence %d on %s, not the fence %d on %s",
			env.Type, env.Seq, env.ExpectSeq, orOwn(env.ExpectSubject), cs, a.claimSubject(env.Thread))
	default:
		return
	}
	a.violation(checkFence, th, seqs(th.claimSeq, env.Seq), msg)
}

// Spec: AbandonOnlyOlder, for the active run the abandon names (the fold
// rules report an abandon of another run, or with another started claim).
func (a *Auditor) abandonOlder(th *thread, env *events.Envelope) {
	a.checked[checkAbandonOnlyOlder]++
	run := env.Event.GetRunAbandoned().GetRunId()
	a.abandonBroken = th.hasActive && th.activeID.eq(run) && th.activeClaim >= th.claimSeq
	if !a.abandonBroken {
		return
	}
	a.violation(checkAbandonOnlyOlder, th, seqs(th.activeStart, env.Seq), fmt.Sprintf(
		"run_abandoned at %d abandons run %q, started under claim %d, which is the newest: only an older claim's run is abandoned",
		env.Seq, run, th.activeClaim))
}

// message returns the index of posted message seq. Messages are consumed
// oldest first, so the first pending one is tried before a search.
func (th *thread) message(seq uint64) (int, bool) {
	if th.next < len(th.msgs) && th.msgs[th.next].seq == seq {
		return th.next, true
	}
	return slices.BinarySearchFunc(th.msgs, seq, func(m message, s uint64) int {
		switch {
		case m.seq < s:
			return -1
		case m.seq > s:
			return 1
		}
		return 0
	})
}

func (a *Auditor) violation(c check, th *thread, s []uint64, msg string) {
	a.nViolations++
	v := Violation{Check: CheckNames[c], Thread: th.id, Seqs: s, Message: msg}
	if a.opts.MaxFindings < 0 || len(a.violations) < a.opts.MaxFindings {
		a.violations = append(a.violations, v)
	}
	if a.opts.OnViolation != nil {
		a.opts.OnViolation(v)
	}
}

// anomaly records an anomaly of an event the fold still applies, in part
// or whole.
func (a *Auditor) anomaly(th *thread, env *events.Envelope, msg string) {
	a.anomalyIgnored(th, env, false, msg)
}

// anomalyIgnored records an anomaly; ignored says the fold applied nothing
// of env.
func (a *Auditor) anomalyIgnored(th *thread, env *events.Envelope, ignored bool, msg string) {
	a.nAnomalies++
	typ := events.TypeOf(env.Event)
	if typ == "" {
		typ = env.Type
	}
	f := Finding{Thread: th.id, Seq: env.Seq, Type: typ, Message: msg, Ignored: ignored}
	if a.opts.MaxFindings < 0 || len(a.anomalies) < a.opts.MaxFindings {
		a.anomalies = append(a.anomalies, f)
	}
	if a.opts.OnAnomaly != nil {
		a.opts.OnAnomaly(f)
	}
}

// seqs lists the nonzero sequences of s: a zero means "none", such as the
// claim subject's previous sequence before the first claim.
func seqs(s ...uint64) []uint64 {
	out := s[:0]
	for _, v := range s {
		if v != 0 {
			out = append(out, v)
		}
	}
	return out
}

func orOwn(subject string) string {
	if subject == "" {
		return "its own subject"
	}
	return subject
}

// Report returns what the audit found so far. The Auditor can go on after.
func (a *Auditor) Report() Report {
	r := Report{
		Events:         a.events,
		Threads:        a.threadsWithIDs,
		FirstSeq:       a.firstSeq,
		LastSeq:        a.lastSeq,
		Violations:     append([]Violation{}, a.violations...),
		Anomalies:      append([]Finding{}, a.anomalies...),
		ViolationCount: a.nViolations,
		AnomalyCount:   a.nAnomalies,
		Checks:         make(map[string]int, numChecks),
	}
	for c, n := range a.checked {
		r.Checks[CheckNames[c]] = n
	}
	a.stranded(&r)
	return r
}

// stranded lists the threads unclaimed for longer than StrandedAfter, oldest
// first: one pass over the threads, at report time only.
func (a *Auditor) stranded(r *Report) {
	after := a.opts.StrandedAfter
	if after <= 0 {
		return
	}
	now := a.opts.Now()
	for _, first := range a.threads {
		for th := first; th != nil; th = th.collide {
			if th.unclaimedSince == 0 || th.id == "" {
				continue
			}
			since := time.Unix(0, th.unclaimedSince)
			if now.Sub(since) <= after {
				continue
			}
			pending := 0
			for _, m := range th.msgs[th.next:] {
				if m.by == 0 {
					pending++
				}
			}
			r.StrandedCount++
			r.Stranded = append(r.Stranded, Stranded{
				Thread: th.id, Since: since.UTC(), Pending: pending,
				OldestSeq: th.msgs[th.next].seq, ReleaseSeq: th.releaseSeq,
			})
		}
	}
	slices.SortFunc(r.Stranded, func(x, y Stranded) int {
		return cmp.Or(x.Since.Compare(y.Since), strings.Compare(x.Thread, y.Thread))
	})
	if m := a.opts.MaxFindings; m >= 0 && len(r.Stranded) > m {
		r.Stranded = r.Stranded[:m]
	}
}
