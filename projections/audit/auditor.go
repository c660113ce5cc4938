package audit

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"

	"artifactr/events"
	"artifactr/events/eventspb"
)

// DefaultMaxFindings is the default of Options.MaxFindings.
const DefaultMaxFindings = 10_000

// Options configure an [Auditor].
type Options struct {
	// Subjects names the stream's subjects; the fence check compares a fenced
	// event's expected-subject header with its thread's claim subject.
	Subjects events.Subjects
	// MaxFindings bounds how many violations, and separately how many
	// anomalies, a report lists, so that auditing a badly broken log of
	// millions of events stays in bounded memory. The counts stay exact.
	// 0 means DefaultMaxFindings; negative means no bound.
	MaxFindings int
}

// Auditor checks a log's events against the spec's invariants as they stream
// by. Feed it envelopes in stream order with [Auditor.Add], any mix of
// threads, then call [Auditor.Report]. It is not safe for concurrent use.
//
// Its state per thread is only what the checks need: posted message
// sequences with the sequence that consumed each, the newest claim, the last
// claim-subject sequence, the active run, abandoned run ids and requests.
// It keeps no texts.
type Auditor struct {
	opts    Options
	prefix  string // the subject prefix, for the fence's expected subject
	seed    maphash.Seed
	threads map[uint64]*thread // by hash of the id; see thread.collide
	last    *thread            // the previous event's thread: streams come in runs

	events            int
	firstSeq, lastSeq uint64
	checked           [numChecks]int

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
	taken       uint64    // newest consumed message: the taken cursor
	next        int       // index of the first message after taken
	msgs        []message // posted messages, in sequence order

	// 128-191: fenced events
	holder    short // the newest claim's holder
	hasActive bool
	collide   *thread          // next thread whose id has the same hash
	abandoned map[short]uint64 // run id -> its run_abandoned

	// 192-255: run events
	activeID  short
	lastEnded short             // the last run that completed or failed
	requests  map[short]request // request id -> request
	id        string            // the id, for reports

	strat strategyState // strategy.go
}

type message struct {
	seq uint64
	by  uint64 // the consuming event, 0 while pending
}

// request is a request_opened. It names its run by the run's start, so that
// a reused run id is another run.
type request struct {
	run      uint64 // its run's run_started
	opened   uint64 // its request_opened
	answered uint64 // its accepted answer_given, 0 while open
}

// Add audits env, the next envelope of the stream.
func (a *Auditor) Add(env events.Envelope) {
	a.add(&env)
}

func (a *Auditor) add(env *events.Envelope) {
	a.events++
	if a.events == 1 || env.Seq < a.firstSeq {
		a.firstSeq = env.Seq
	}
	a.lastSeq = max(a.lastSeq, env.Seq)
	th := a.thread(env.Thread)
	if env.Seq <= th.lastSeq || env.Seq == 0 {
		a.anomaly(th, env, fmt.Sprintf("sequence %d does not follow %d: the stream is out of order or repeats", env.Seq, th.lastSeq))
		return
	}
	th.lastSeq = env.Seq
	ev := env.Event
	typ := events.TypeOf(ev)
	kind := env.Kind
	if kind == "" {
		kind = typ.Kind()
	}
	// JetStream counts every message on the claim subject in its
	// expected-sequence checks, whatever its payload.
	prevClaimSubj := th.lastClaimSubj
	if kind == events.KindClaim {
		th.lastClaimSubj = env.Seq
	}
	prevRunSubj := th.lastRunSubj
	if kind == events.KindRun {
		th.lastRunSubj = env.Seq
	}
	if reason := malformed(env, typ); reason != "" {
		a.anomaly(th, env, reason)
		return
	}
	env.Type = typ // the messages name it; a hand-made envelope may not
	switch b := ev.GetBody().(type) {
	case *eventspb.Event_MessagePosted:
		th.msgs = append(th.msgs, message{seq: env.Seq})
		a.postStrategy(th, env, b.MessagePosted) // strategy.go
	case *eventspb.Event_ThreadClaimed:
		a.claimChain(th, env, prevClaimSubj)
		holder := b.ThreadClaimed.GetHolder()
		if holder == "" {
			holder = ev.GetHolder()
		}
		th.claimSeq, th.releaseSeq = env.Seq, 0
		th.holder.set(holder)
	case *eventspb.Event_ThreadReleased:
		a.claimChain(th, env, prevClaimSubj)
		a.release(th, env)
	case *eventspb.Event_RunStarted:
		a.fence(th, env)
		a.startRun(th, env, b.RunStarted)
	case *eventspb.Event_RunOutput:
		a.runChain(th, env, prevRunSubj)
		a.runEvent(th, env, b.RunOutput.GetRunId())
	case *eventspb.Event_RequestOpened:
		a.runChain(th, env, prevRunSubj)
		a.openRequest(th, env, b.RequestOpened)
	case *eventspb.Event_AnswerGiven:
		a.fence(th, env)
		a.answer(th, env, b.AnswerGiven)
	case *eventspb.Event_SteeringGiven:
		a.fence(th, env)
		if !th.isActive(b.SteeringGiven.GetRunId()) {
			a.notActive(th, env, b.SteeringGiven.GetRunId())
		}
		a.consume(th, env, b.SteeringGiven.GetMessageSeq())
	case *eventspb.Event_RunCompleted:
		a.runChain(th, env, prevRunSubj)
		if a.runEvent(th, env, b.RunCompleted.GetRunId()) {
			th.hasActive, th.lastEnded = false, th.activeID
		}
	case *eventspb.Event_RunFailed:
		a.runChain(th, env, prevRunSubj)
		if a.runEvent(th, env, b.RunFailed.GetRunId()) {
			th.hasActive, th.lastEnded = false, th.activeID
		}
	case *eventspb.Event_RunAbandoned:
		a.fence(th, env)
		a.abandon(th, env, b.RunAbandoned)
	case *eventspb.Event_ThreadConfigured, *eventspb.Event_CancelRequested, *eventspb.Event_RunInterrupted:
		a.strategyEvent(th, env, prevRunSubj) // strategy.go
	}
}

// malformed returns why env is not an event of its subject's thread, or "".
func malformed(env *events.Envelope, typ events.Type) string {
	switch {
	case env.Err != nil:
		return env.Err.Error()
	case typ == "":
		return fmt.Sprintf("event has no known body (type header %q)", env.Type)
	case env.Event.GetThread() != env.Thread:
		return fmt.Sprintf("event names thread %q on a subject of thread %q", env.Event.GetThread(), env.Thread)
	case env.Type != "" && env.Type != typ:
		return fmt.Sprintf("type header %q names another body than %s", env.Type, typ)
	case env.Kind != "" && env.Kind != typ.Kind():
		return fmt.Sprintf("%s event on the %s subject", typ, env.Kind)
	}
	return ""
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

func (th *thread) isActive(run string) bool { return th.hasActive && th.activeID.eq(run) }

// isClaimSubject reports whether subject is thread's claim subject,
// "<prefix>.<thread>.claim", without building that string.
func (a *Auditor) isClaimSubject(subject, thread string) bool {
	p := a.prefix
	rest, ok := strings.CutPrefix(subject, p)
	if !ok || len(rest) != 1+len(thread)+len(".claim") || rest[0] != '.' {
		return false
	}
	return rest[1:1+len(thread)] == thread && rest[1+len(thread):] == ".claim"
}

func (a *Auditor) claimSubject(thread string) string {
	return a.opts.Subjects.Thread(thread, events.KindClaim)
}

// Spec: ClaimChain. prev is the claim subject's last sequence before env.
func (a *Auditor) claimChain(th *thread, env *events.Envelope, prev uint64) {
	a.checked[checkClaimChain]++
	if env.ExpectSeq == prev && (env.ExpectSubject == "" || a.isClaimSubject(env.ExpectSubject, env.Thread)) {
		return
	}
	a.violation(checkClaimChain, th, seqs(prev, env.Seq), fmt.Sprintf(
		"%s at %d expected sequence %d on %s, but the claim subject's last sequence was %d",
		env.Type, env.Seq, env.ExpectSeq, orOwn(env.ExpectSubject), prev))
}

// Spec: RunChain (DESIGN §3: run_output, request_opened, run_completed and
// run_failed are a compare-and-set on the run subject). JetStream refuses a
// check that does not hold, so a stored event either expects exactly the
// run subject's previous sequence or carries no check on it at all; the
// latter is no holder's write. A run event always follows its run_started
// on the same subject, so the expected sequence is never 0 and a missing
// header (read as 0) is told apart.
func (a *Auditor) runChain(th *thread, env *events.Envelope, prev uint64) {
	a.checked[checkRunChain]++
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

func (a *Auditor) release(th *thread, env *events.Envelope) {
	cs, holder := env.Event.GetClaimSeq(), env.Event.GetHolder()
	switch {
	case th.claimSeq == 0 || cs != th.claimSeq:
		a.anomaly(th, env, fmt.Sprintf("release of claim %d, but the newest claim is %d", cs, th.claimSeq))
	case th.releaseSeq != 0:
		a.anomaly(th, env, fmt.Sprintf("claim %d is already released at %d", cs, th.releaseSeq))
	case !th.holder.eq(holder):
		a.anomaly(th, env, fmt.Sprintf("release of claim %d by %q, but its holder is %q", cs, holder, th.holder.String()))
	default:
		th.releaseSeq = env.Seq
	}
}

// Spec: FenceNewestClaim (DESIGN §3: RunStart and Reply are fenced).
func (a *Auditor) fence(th *thread, env *events.Envelope) {
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
	case env.ExpectSeq != cs || !a.isClaimSubject(env.ExpectSubject, env.Thread):
		msg = fmt.Sprintf("%s at %d was appended expecting sequence %d on %s, not the fence %d on %s",
			env.Type, env.Seq, env.ExpectSeq, orOwn(env.ExpectSubject), cs, a.claimSubject(env.Thread))
	default:
		return
	}
	a.violation(checkFence, th, seqs(th.claimSeq, env.Seq), msg)
}

// Spec: I3_OneActiveRun. The run starts whatever the checks say: the audit
// follows the log, as the fold does.
func (a *Auditor) startRun(th *thread, env *events.Envelope, b *eventspb.RunStarted) {
	a.checked[checkI3]++
	if th.hasActive {
		a.violation(checkI3, th, seqs(th.activeStart, env.Seq), fmt.Sprintf(
			"run %q started at %d while run %q, started at %d, was active", b.GetRunId(), env.Seq, th.activeID.String(), th.activeStart))
	}
	a.consume(th, env, b.GetPromptSeq())
	th.hasActive, th.activeStart, th.activeClaim = true, env.Seq, env.Event.GetClaimSeq()
	th.activeID.set(b.GetRunId())
}

// Spec: I1_ConsumedAtMostOnce. Every consuming event consumes its message,
// whatever else is wrong with it: a writer handed the message out.
func (a *Auditor) consume(th *thread, env *events.Envelope, seq uint64) {
	a.checked[checkI1]++
	i, ok := th.message(seq)
	if !ok {
		a.anomaly(th, env, fmt.Sprintf("%s names message %d, which was not posted in this thread", env.Type, seq))
		return
	}
	m := &th.msgs[i]
	if m.by != 0 {
		a.violation(checkI1, th, seqs(seq, m.by, env.Seq), fmt.Sprintf(
			"message %d was consumed again by %s at %d; it was first consumed at %d", seq, env.Type, env.Seq, m.by))
		return
	}
	if i != th.next {
		a.anomaly(th, env, fmt.Sprintf("message %d is not the oldest pending message", seq))
	}
	m.by = env.Seq
	if seq > th.taken {
		th.taken, th.next = seq, i+1
	}
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

// runEvent audits an unfenced event of run (run_output, request_opened,
// run_completed, run_failed) and reports whether run is the active run.
// Spec: NoEndAfterAbandon.
func (a *Auditor) runEvent(th *thread, env *events.Envelope, run string) bool {
	a.checked[checkNoEndAfterAbandon]++
	if th.isActive(run) {
		return true
	}
	if at, ok := th.abandoned[mkShort(run)]; ok {
		a.violation(checkNoEndAfterAbandon, th, seqs(at, env.Seq), fmt.Sprintf(
			"%s at %d is of run %q, which was abandoned at %d", env.Type, env.Seq, run, at))
		return false
	}
	a.notActive(th, env, run)
	return false
}

func (a *Auditor) openRequest(th *thread, env *events.Envelope, b *eventspb.RequestOpened) {
	if !a.runEvent(th, env, b.GetRunId()) {
		return
	}
	id := b.GetRequestId()
	key := mkShort(id)
	if q, dup := th.requests[key]; dup {
		a.anomaly(th, env, fmt.Sprintf("request %q is already open since %d", id, q.opened))
		return
	}
	if th.requests == nil {
		th.requests = make(map[short]request)
	}
	th.requests[key] = request{run: th.activeStart, opened: env.Seq}
}

// Spec: AnswerOnce. The answer is accepted only for an open request of the
// active run; its message is consumed in any case.
func (a *Auditor) answer(th *thread, env *events.Envelope, b *eventspb.AnswerGiven) {
	a.checked[checkAnswerOnce]++
	id, run := b.GetRequestId(), b.GetRunId()
	key := mkShort(id)
	q, known := th.requests[key]
	switch {
	case known && q.answered != 0:
		a.violation(checkAnswerOnce, th, seqs(q.opened, q.answered, env.Seq), fmt.Sprintf(
			"request %q was answered again at %d; it was first answered at %d", id, env.Seq, q.answered))
	case !th.isActive(run):
		a.notActive(th, env, run)
	case !known:
		a.anomaly(th, env, fmt.Sprintf("answer to unknown request %q", id))
	case q.run != th.activeStart:
		a.anomaly(th, env, fmt.Sprintf("answer to request %q of another run (opened at %d)", id, q.opened))
	default:
		q.answered = env.Seq
		th.requests[key] = q
	}
	a.consume(th, env, b.GetMessageSeq())
}

func (a *Auditor) abandon(th *thread, env *events.Envelope, b *eventspb.RunAbandoned) {
	run := b.GetRunId()
	if run != "" && !th.hasActive && th.lastEnded == mkShort(run) {
		// The run's own holder recorded its end first: the new claimant
		// planned the abandon before the end reached it. Nothing to undo.
		return
	}
	if !th.isActive(run) {
		a.notActive(th, env, run)
		return
	}
	if b.GetStartedClaimSeq() != th.activeClaim {
		a.anomaly(th, env, fmt.Sprintf("run %q started under claim %d, not %d as its abandon says", run, th.activeClaim, b.GetStartedClaimSeq()))
	}
	// The last run ended abandoned, not completed or failed: a late
	// abandon of an earlier run is no longer the benign race above.
	th.hasActive, th.lastEnded = false, short{}
	if th.abandoned == nil {
		th.abandoned = make(map[short]uint64)
	}
	th.abandoned[mkShort(run)] = env.Seq
}

func (a *Auditor) notActive(th *thread, env *events.Envelope, run string) {
	switch {
	case th.hasActive:
		a.anomaly(th, env, fmt.Sprintf("run %q is not the active run %q", run, th.activeID.String()))
	default:
		a.anomaly(th, env, fmt.Sprintf("run %q is not active: no run is", run))
	}
}

func (a *Auditor) violation(c check, th *thread, s []uint64, msg string) {
	a.nViolations++
	if a.opts.MaxFindings < 0 || len(a.violations) < a.opts.MaxFindings {
		a.violations = append(a.violations, Violation{Check: CheckNames[c], Thread: th.id, Seqs: s, Message: msg})
	}
}

func (a *Auditor) anomaly(th *thread, env *events.Envelope, msg string) {
	a.nAnomalies++
	if a.opts.MaxFindings < 0 || len(a.anomalies) < a.opts.MaxFindings {
		typ := events.TypeOf(env.Event)
		if typ == "" {
			typ = env.Type
		}
		a.anomalies = append(a.anomalies, Finding{Thread: th.id, Seq: env.Seq, Type: typ, Message: msg})
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
	return r
}
