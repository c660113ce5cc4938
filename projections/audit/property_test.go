package audit

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/eventgen"
	"github.com/artifactr/artifactr/projections"
)

func randomLog(seed uint64, cfg eventgen.Config) (*eventgen.Log, eventgen.Stats) {
	return eventgen.Random(rand.New(rand.NewPCG(seed, 3)), cfg)
}

// Logs of well-behaved writers, with takeovers that abandon and releases,
// pass every check with no anomaly.
func TestAuditor_Add_randomCleanLogs(t *testing.T) {
	for seed := range uint64(20) {
		l, _ := randomLog(seed, eventgen.Config{Threads: 8, Events: 5000})
		r := run(l.Envs)
		if !r.OK() || r.AnomalyCount != 0 {
			var b strings.Builder
			_ = r.WriteText(&b)
			t.Fatalf("seed %d: clean log reported:\n%s", seed, b.String())
		}
		for _, name := range CheckNames {
			if r.Checks[name] == 0 {
				t.Errorf("seed %d: check %s examined nothing", seed, name)
			}
		}
	}
}

// Each planted fault is found once, by its check, and no other violation
// is reported.
func TestAuditor_Add_plantedFaults(t *testing.T) {
	byFault := map[eventgen.Fault]string{
		eventgen.FaultStaleFence:      CheckFence,
		eventgen.FaultReconsume:       CheckI1,
		eventgen.FaultChainBreak:      CheckClaimChain,
		eventgen.FaultEndAfterAbandon: CheckNoEndAfterAbandon,
		eventgen.FaultAnswerTwice:     CheckAnswerOnce,
	}
	for seed := range uint64(10) {
		l, stats := randomLog(seed, eventgen.Config{Threads: 5, Events: 5000, Faults: 0.05})
		r := run(l.Envs)
		want := map[string]int{}
		for f, check := range byFault {
			if n := stats.Faults[f]; n > 0 {
				want[check] += n
			}
		}
		if n := stats.Faults[eventgen.FaultReconsume]; n > 0 {
			want[CheckGivenToActive] += n // its answer names no open request too
		}
		if n := stats.Faults[eventgen.FaultStaleFence]; n > 0 {
			want[CheckAbandonOnlyOlder] += n // it abandons a run that is not active
		}
		if n := stats.Faults[eventgen.FaultAnswerTwice]; n > 0 {
			want[CheckNoneSkipped] += n // its answer names message 0, never posted
		}
		got := map[string]int{}
		for _, v := range r.Violations {
			got[v.Check]++
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("seed %d: violations by check %v, want %v (planted %v)", seed, got, want, stats.Faults)
		}
		if min := stats.Faults[eventgen.FaultGarbage] + stats.Faults[eventgen.FaultHeader]; r.AnomalyCount < min {
			t.Errorf("seed %d: %d anomalies, want at least the %d garbage and forged headers", seed, r.AnomalyCount, min)
		}
	}
}

// The audit and the fold judge a log alike, as both fold it with the same
// rules (projections.Rules): on each event, every finding of the fold is one
// finding of the audit, a violation of the invariant it breaks or an
// anomaly with the same reason, and the audit finds no other, but for its
// own checks of how events were appended (the fence, the claim and run
// chains), which are not the fold's business.
func TestAuditor_agreesWithFold(t *testing.T) {
	for seed := range uint64(40) {
		t.Logf("seed %d", seed)
		l, _ := randomLog(seed, eventgen.Config{Threads: 3, Events: 800, Faults: 0.25, Chaos: true})
		checkAgreesWithFold(t, l.Envs)
	}
}

// finding is one finding on one event: a reason, or for a violation the
// check it failed.
type finding struct {
	thread string
	seq    uint64
	what   string
}

func checkAgreesWithFold(t *testing.T, all []events.Envelope) {
	t.Helper()
	// The fold skips what it applied already; the audit reports it, as the
	// stream's order is its business. Both see each sequence once here.
	var envs []events.Envelope
	last := map[string]uint64{}
	for _, env := range all {
		if env.Seq > last[env.Thread] {
			last[env.Thread] = env.Seq
			envs = append(envs, env)
		}
	}
	r := NewWithOptions(Options{MaxFindings: -1})
	for _, env := range envs {
		r.Add(env)
	}
	rep := r.Report()
	var got []finding
	for _, v := range rep.Violations {
		switch v.Check {
		case CheckNames[checkFence], CheckNames[checkClaimChain], CheckNames[checkRunChain]:
			continue
		}
		got = append(got, finding{v.Thread, v.Seqs[len(v.Seqs)-1], v.Check})
	}
	for _, a := range rep.Anomalies {
		got = append(got, finding{a.Thread, a.Seq, a.Message})
	}
	threads := map[string][]events.Envelope{}
	for _, env := range envs {
		threads[env.Thread] = append(threads[env.Thread], env)
	}
	var want []finding
	for id, tenvs := range threads {
		for _, a := range projections.Fold(id, tenvs).Anomalies {
			want = append(want, finding{id, a.Seq, a.Reason})
		}
	}
	isCheck := func(s string) bool { return slices.Contains(CheckNames[:], s) }
	bySeq := func(fs []finding) map[finding][]string {
		m := map[finding][]string{}
		for _, f := range fs {
			k := finding{thread: f.thread, seq: f.seq}
			m[k] = append(m[k], f.what)
		}
		return m
	}
	g, w := bySeq(got), bySeq(want)
	for k, reasons := range w {
		have := g[k]
		if len(have) != len(reasons) {
			t.Fatalf("thread %q seq %d: the fold found %q; the audit %q", k.thread, k.seq, reasons, have)
		}
		for _, h := range have {
			if !isCheck(h) && !slices.Contains(reasons, h) {
				t.Fatalf("thread %q seq %d: the audit found %q; the fold %q", k.thread, k.seq, h, reasons)
			}
		}
	}
	for k, have := range g {
		if _, ok := w[k]; !ok {
			t.Fatalf("thread %q seq %d: the audit found %q; the fold nothing", k.thread, k.seq, have)
		}
	}
}

func TestReport_WriteText(t *testing.T) {
	l := eventgen.NewLog()
	m := l.Post(poster.Post("a", "x")).Seq
	a := claim(l, "A")
	l.Fenced(a.Started("r1", m))
	l.CAS(a.Completed("r1"))
	l.Fenced(a.Started("r2", m))
	l.Raw("threads.T.run", nil, []byte{0xff})
	var b bytes.Buffer
	if err := run(l.Envs).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `audit FAIL: 6 events (seq 1..6) in 1 threads, 1 violations, 1 anomalies
checks: I1_ConsumedAtMostOnce=2 I3_OneActiveRun=2 FenceNewestClaim=2 ClaimChain=1 NoEndAfterAbandon=1 AnswerOnce=0 RunChain=1 RejectOnlyIdle=1 NoneSkipped=2 RunByHolder=1 ReleaseByHolder=0 GivenToActive=0 AbandonOnlyOlder=0
violations:
  I1_ConsumedAtMostOnce thread T seqs 1,3,5: message 1 was consumed again by run_started at 5; it was first consumed at 3
anomalies:
  thread T seq 6 (unknown type): undecodable payload`
	if got := b.String(); !strings.HasPrefix(got, want) {
		t.Errorf("WriteText =\n%s\nwant prefix\n%s", got, want)
	}
}

// The JSON field names are part of the CLI's interface (see doc.go).
func TestReport_MarshalJSON(t *testing.T) {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(New().Report()); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ok", "events", "threads", "first_seq", "last_seq", "violations", "anomalies", "violation_count", "anomaly_count", "checks"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b.String())
		}
	}
	if m["ok"] != true || b.String() == "" || !strings.Contains(b.String(), `"violations":[]`) {
		t.Errorf("JSON = %s; want ok true and empty lists", b.String())
	}

	l := eventgen.NewLog()
	a := claim(l, "A")
	l.Event(a.Released(), events.Check{})
	rep := run(l.Envs)
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(back, rep) {
		t.Errorf("round trip = %+v, %v; want %+v", back, err, rep)
	}
	if !strings.Contains(string(data), `"check":"ClaimChain","thread":"T","seqs":[1,2]`) {
		t.Errorf("JSON = %s", data)
	}
}

// Spec: the audit is total too. Any bytes make a log the auditor reads
// without a panic, judging it as the fold does.
func FuzzAuditor_Add(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x02, 't', '0', 0xff})
	for seed := range uint64(8) {
		b := make([]byte, 64+seed*40)
		r := rand.New(rand.NewPCG(seed, 2))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l := eventgen.FromBytes(data)
		l.Raw("threads.t0.run", eventgen.Header(events.TypeAnswerGiven), data)
		checkAgreesWithFold(t, l.Envs)
		checkAgreesWithFold(t, runFenced(l.Envs)) // markers on the run subject
		r := run(l.Envs)
		if err := r.WriteText(new(bytes.Buffer)); err != nil {
			t.Fatal(err)
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatal(err)
		}
	})
}
