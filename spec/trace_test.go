package spec

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections/audit"
)

// tlog builds a thread's log by hand, as the code would write it, with
// the expected-sequence checks its appends carry (DESIGN §3), which the
// audit's rules check.
type tlog struct {
	thread string
	envs   *[]events.Envelope // shared by the threads of one stream
	claims map[string]events.Claim
	last   map[events.Kind]uint64 // the thread's last sequence per subject
	// runFence writes the RUNFENCE layout: markers on the run subject, and
	// every holder write a compare-and-set on it (runfence_trace_test.go).
	runFence bool
}

func newLog() *tlog {
	return &tlog{thread: "t", envs: new([]events.Envelope), claims: map[string]events.Claim{}, last: map[events.Kind]uint64{}}
}

// on returns a builder for another thread of the same stream.
func (l *tlog) on(thread string) *tlog {
	return &tlog{thread: thread, envs: l.envs, claims: map[string]events.Claim{}, last: map[events.Kind]uint64{}, runFence: l.runFence}
}

func (l *tlog) add(ev *eventspb.Event) uint64 {
	seq := uint64(len(*l.envs) + 1)
	ev.Thread = l.thread
	typ := events.TypeOf(ev)
	kind := typ.Kind()
	if l.runFence && kind == events.KindClaim {
		kind = events.KindRun
	}
	env := events.Envelope{Seq: seq, Thread: l.thread, Kind: kind, Type: typ, Event: ev,
		Subject: events.Subjects{}.Thread(l.thread, kind)}
	switch {
	case l.runFence && kind == events.KindRun:
		env.ExpectSeq = l.last[kind]
	case typ.Fenced():
		env.ExpectSeq, env.ExpectSubject = ev.GetClaimSeq(), events.Subjects{}.Thread(l.thread, events.KindClaim)
	case kind != events.KindPosted:
		env.ExpectSeq = l.last[kind]
	}
	l.last[kind] = seq
	*l.envs = append(*l.envs, env)
	return seq
}

func (l *tlog) post() uint64 {
	return l.add(&eventspb.Event{Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: fmt.Sprintf("m%d", len(*l.envs)+1)}}})
}

func (l *tlog) claim(h string) {
	seq := l.add(&eventspb.Event{Holder: h, Body: &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{Holder: h}}})
	l.claims[h] = events.Claim{Thread: l.thread, Holder: h, Seq: seq}
}

func (l *tlog) release(h string) {
	c := l.claims[h]
	l.add(&eventspb.Event{Holder: h, ClaimSeq: c.Seq, Body: &eventspb.Event_ThreadReleased{ThreadReleased: &eventspb.ThreadReleased{Holder: h}}})
}

var t0 = time.Time{}

func (l *tlog) start(h, run string, prompt uint64) {
	l.add(events.NewRunStarted(l.claims[h], t0, run, prompt, "a"))
}
func (l *tlog) output(h, run string) { l.add(events.NewRunOutput(l.claims[h], t0, run, "x")) }
func (l *tlog) ask(h, run, req string) {
	l.add(events.NewRequestOpened(l.claims[h], t0, run, req, "?"))
}
func (l *tlog) answer(h, run, req string, msg uint64) {
	l.add(events.NewAnswerGiven(l.claims[h], t0, run, req, msg))
}
func (l *tlog) steer(h, run string, msg uint64) {
	l.add(events.NewSteeringGiven(l.claims[h], t0, run, msg))
}
func (l *tlog) end(h, run string)  { l.add(events.NewRunCompleted(l.claims[h], t0, run, "ok")) }
func (l *tlog) fail(h, run string) { l.add(events.NewRunFailed(l.claims[h], t0, run, "no")) }
func (l *tlog) abandon(h, run, by string) {
	l.add(events.NewRunAbandoned(l.claims[h], t0, run, l.claims[by].Seq, "taken over"))
}

func validate(envs []events.Envelope) TraceReport {
	v := NewTraceValidator()
	for _, e := range envs {
		v.Add(e)
	}
	return v.Report()
}

func mustConform(t *testing.T, l *tlog) {
	t.Helper()
	if r := validate(*l.envs); !r.OK() {
		t.Fatalf("%s", r.Nonconforming[0])
	}
}

// mustFlag requires the event at seq to be the first that does not
// conform, with want among the expected actions.
func mustFlag(t *testing.T, l *tlog, seq uint64, want string) Nonconformance {
	t.Helper()
	r := validate(*l.envs)
	if r.OK() {
		t.Fatalf("the log conforms; want seq %d flagged", seq)
	}
	n := r.Nonconforming[0]
	t.Logf("%s", n)
	if n.Seq != seq || n.Thread != l.thread {
		t.Errorf("flagged thread %s seq %d, want %s seq %d", n.Thread, n.Seq, l.thread, seq)
	}
	if want != "" && !slices.Contains(n.Expected, want) {
		t.Errorf("expected %v, want it to include %s", n.Expected, want)
	}
	return n
}

// Several runs per claim, several replies per run, steering, a release,
// a takeover with an abandon, and a run whose end beat the abandon.
func TestTrace_conforming(t *testing.T) {
	l := newLog()
	m1 := l.post()
	l.claim("A")
	l.start("A", "r1", m1)
	l.output("A", "r1")
	l.ask("A", "r1", "q1")
	l.ask("A", "r1", "q2")
	m2, m3, m4 := l.post(), l.post(), l.post()
	l.answer("A", "r1", "q1", m2)
	l.answer("A", "r1", "q2", m3)
	l.steer("A", "r1", m4)
	l.end("A", "r1")
	m5 := l.post()
	l.start("A", "r2", m5)
	l.fail("A", "r2")
	l.release("A")
	m6 := l.post()
	l.claim("B")
	l.start("B", "r3", m6)
	// B's session lapses; C takes over and abandons r3.
	l.claim("C")
	l.abandon("C", "r3", "B")
	m7 := l.post()
	l.start("C", "r4", m7)
	// D claims; C's end lands before D's planned abandon.
	l.claim("D")
	l.end("C", "r4")
	l.abandon("D", "r4", "C")
	l.start("D", "r5", l.post())
	mustConform(t, l)
}

// ADR-0069: A's lease lapses before its run_started; B claims; A's start
// lands anyway (no fence).
func TestTrace_adr0069_staleStartFlagged(t *testing.T) {
	l := newLog()
	m1 := l.post()
	l.claim("A")
	l.claim("B")
	l.start("A", "rA", m1)
	n := mustFlag(t, l, 4, "RunStart(B)")
	if n.Action != "RunStart(A)" {
		t.Errorf("Action = %q, want RunStart(A)", n.Action)
	}
}

func TestTrace_endAfterAbandonFlagged(t *testing.T) {
	l := newLog()
	l.claim("A")
	l.start("A", "r1", l.post())
	l.claim("B")
	l.abandon("B", "r1", "A")
	l.end("A", "r1")
	mustFlag(t, l, 6, "")
}

func TestTrace_staleAbandonFlagged(t *testing.T) {
	l := newLog()
	m1 := l.post()
	l.claim("A")
	l.claim("B")
	l.start("B", "r1", m1)
	l.abandon("A", "r1", "B")
	mustFlag(t, l, 5, "RunEnd(B)")
}

func TestTrace_answerTwiceFlagged(t *testing.T) {
	l := newLog()
	l.claim("A")
	l.start("A", "r1", l.post())
	l.ask("A", "r1", "q1")
	l.answer("A", "r1", "q1", l.post())
	l.answer("A", "r1", "q1", l.post())
	mustFlag(t, l, 8, "Steer(A)")
}

func TestTrace_staleReleaseFlagged(t *testing.T) {
	l := newLog()
	l.claim("A")
	l.claim("B")
	l.release("A")
	mustFlag(t, l, 3, "Release(B)")
}

func TestTrace_notOldestMessageFlagged(t *testing.T) {
	l := newLog()
	l.post()
	m2 := l.post()
	l.claim("A")
	l.start("A", "r1", m2)
	n := mustFlag(t, l, 4, "")
	if !slices.Equal(n.Checks, []string{"NoneSkipped"}) || !strings.Contains(n.Reason, "message 1") {
		t.Errorf("checks %v, Reason = %q, want NoneSkipped naming message 1", n.Checks, n.Reason)
	}
}

func TestTrace_secondActiveRunFlagged(t *testing.T) {
	l := newLog()
	l.claim("A")
	l.start("A", "r1", l.post())
	l.start("A", "r2", l.post())
	mustFlag(t, l, 5, "RunEnd(A)")
}

func TestTrace_noMarkerFlagged(t *testing.T) {
	l := newLog()
	l.claim("A")
	l.claims["X"] = events.Claim{Thread: "t", Holder: "X", Seq: 1}
	l.start("X", "r1", l.post())
	mustFlag(t, l, 3, "")
}

// A malformed event is an anomaly the fold ignores: no step, and no
// nonconformance, as the plain audit lists it and passes (issue 27).
func TestTrace_malformedIsAnAnomaly(t *testing.T) {
	l := newLog()
	l.claim("A")
	*l.envs = append(*l.envs, events.Envelope{Seq: 2, Thread: "t", Err: errors.New("undecodable")})
	l.start("A", "r1", l.post())
	mustConform(t, l)
}

// Threads are validated apart: one thread's fault does not stop another's.
func TestTrace_threadsApart(t *testing.T) {
	a := newLog()
	b := a.on("u")
	a.claim("A")
	b.claim("A")
	ma, mb := a.post(), b.post()
	a.start("A", "r1", ma)
	b.claim("B")
	b.start("A", "r1", mb)
	a.end("A", "r1")
	r := validate(*a.envs)
	if len(r.Nonconforming) != 1 || r.Nonconforming[0].Thread != "u" || r.Threads != 2 {
		t.Errorf("report = %+v, want thread u alone flagged", r)
	}
}

// A long log stays within the model's capacities: many claims, runs and
// messages are renumbered away.
func TestTrace_longLogConforms(t *testing.T) {
	l := newLog()
	active, prev := "", ""
	for i := range 100 {
		h := fmt.Sprintf("h%d", i)
		l.claim(h)
		if active != "" {
			l.abandon(h, active, prev)
		}
		m1, m2, m3 := l.post(), l.post(), l.post()
		run := h + "-r1"
		l.start(h, run, m1)
		l.ask(h, run, h+"-q")
		l.answer(h, run, h+"-q", m2)
		active, prev = run, h
		if i%2 == 0 {
			l.end(h, run)
			l.start(h, h+"-r2", m3)
			active = h + "-r2"
		} else {
			l.steer(h, run, m3)
		}
	}
	mustConform(t, l)
}

// A claim whose run is still active may end it or ask, but its fenced
// writes are refused once a newer marker exists: the model decides.
func TestTrace_staleSteerFlagged(t *testing.T) {
	l := newLog()
	l.claim("A")
	l.start("A", "r1", l.post())
	m2 := l.post()
	l.claim("B")
	l.ask("A", "r1", "q1")
	l.steer("A", "r1", m2)
	n := mustFlag(t, l, 7, "Abandon(B)")
	if !strings.Contains(n.Reason, "Steer(A) is not enabled") {
		t.Errorf("Reason = %q, want the model's refusal", n.Reason)
	}
}

// BenchmarkTraceValidator_event is the validator's cost per event on a log
// of takeovers, runs, requests, answers and steering.
func BenchmarkTraceValidator_event(b *testing.B) {
	l := newLog()
	active, prev := "", ""
	for i := range 2000 {
		h := fmt.Sprintf("h%d", i)
		l.claim(h)
		if active != "" {
			l.abandon(h, active, prev)
		}
		m1, m2, m3 := l.post(), l.post(), l.post()
		run := h + "-r1"
		l.start(h, run, m1)
		l.ask(h, run, h+"-q")
		l.answer(h, run, h+"-q", m2)
		l.steer(h, run, m3)
		active, prev = run, h
	}
	envs := *l.envs
	b.ResetTimer()
	n := 0
	for b.Loop() {
		v := NewTraceValidator()
		for _, e := range envs {
			v.Add(e)
		}
		if !v.Report().OK() {
			b.Fatal(v.Report().Nonconforming[0])
		}
		n += len(envs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/event")
}

// The model decides, not the validator: against the model without the
// fence, ADR-0069's stale start and a stale steering conform; against the
// fenced one they do not. (B's start of the same prompt would still be
// refused: the validator's message table maps the model's messages to the
// log's, oldest pending first, so a message consumed twice has no place in
// it whatever the model.)
func TestTrace_modelDecides(t *testing.T) {
	adr := newLog()
	m1 := adr.post()
	adr.claim("A")
	adr.claim("B")
	adr.start("A", "rA", m1)
	steer := newLog()
	steer.claim("A")
	steer.start("A", "r1", steer.post())
	m2 := steer.post()
	steer.claim("B")
	steer.steer("A", "r1", m2)
	for name, l := range map[string]*tlog{"adr": adr, "steer": steer} {
		c := traceConfig()
		c.Fence = false
		v := newTraceValidator(c, audit.Options{})
		v.modelOnly = true
		for _, e := range *l.envs {
			v.Add(e)
		}
		if r := v.Report(); !r.OK() {
			t.Errorf("%s: without the fence the model allows it, but: %s", name, r.Nonconforming[0])
		}
		if validate(*l.envs).OK() {
			t.Errorf("%s: the fenced model allows it", name)
		}
	}
}
