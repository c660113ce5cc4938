package summaries

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/eventgen"
	"github.com/artifactr/artifactr/projections"
)

func randomLog(seed uint64, cfg eventgen.Config) *eventgen.Log {
	l, _ := eventgen.Random(rand.New(rand.NewPCG(seed, 7)), cfg)
	return l
}

// checkAgainstThread folds l event by event both ways, per thread, and
// compares the touched thread's summary with the full fold's after every
// event.
func checkAgainstThread(t *testing.T, name string, l *eventgen.Log) {
	t.Helper()
	sums := map[string]Summary{}
	full := map[string]*projections.Thread{}
	for i, env := range l.Envs {
		th := env.Thread
		if events.ValidateThreadID(th) != nil {
			continue // no thread to attribute it to; the projector skips it
		}
		s, ok := sums[th]
		if !ok {
			s, full[th] = Empty(th), projections.New(th)
		}
		sums[th] = Apply(s, env)
		full[th].Apply(env)
		want := FromThread(full[th])
		if got := sums[th]; !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: after event %d (seq %d, %s) of %s:\n got %+v\nwant %+v", name, i, env.Seq, env.Type, th, got, want)
		}
	}
}

// Spec: projections.Thread is the reference fold; a summary is a small
// projection of it that must agree on every field.
func TestApply_matchesThread_randomLogs(t *testing.T) {
	for seed := range uint64(8) {
		checkAgainstThread(t, "clean", randomLog(seed, eventgen.Config{Threads: 6, Events: 3000}))
		checkAgainstThread(t, "faults", randomLog(seed, eventgen.Config{Threads: 4, Events: 3000, Faults: 0.05}))
	}
}

// Chaos (random events, redeliveries, bad subjects): Apply never panics,
// and agrees with projections.Thread on every field, as both fold with the
// same rules. Spec: projections.Rules.
func TestApply_matchesThread_chaos(t *testing.T) {
	for seed := range uint64(40) {
		t.Logf("seed %d", seed)
		l := randomLog(seed, eventgen.Config{Threads: 3, Events: 3000, Faults: 0.2, Chaos: true})
		checkAgainstThread(t, "chaos", l)
	}
}

// The same with the markers on the run subject (the RUNFENCE layout): the
// summary and the reference fold take them from there alike.
func TestApply_matchesThread_runFenced(t *testing.T) {
	for seed := range uint64(10) {
		for _, cfg := range []eventgen.Config{{Threads: 4, Events: 2000}, {Threads: 3, Events: 2000, Faults: 0.2, Chaos: true}} {
			l := randomLog(seed, cfg)
			l.Envs = eventgen.RunFenced(l.Subjects, l.Envs)
			checkAgainstThread(t, "runFenced", l)
			if cfg.Chaos {
				continue
			}
			byThread := map[string][]events.Envelope{} // a clean log stays clean
			for _, env := range l.Envs {
				byThread[env.Thread] = append(byThread[env.Thread], env)
			}
			for id, envs := range byThread {
				if th := projections.Fold(id, envs); len(th.Anomalies) != 0 {
					t.Fatalf("seed %d: clean log, thread %s: %+v", seed, id, th.Anomalies[0])
				}
			}
		}
	}
}

func FuzzApply(f *testing.F) {
	f.Add([]byte("seed"))
	f.Add([]byte{0xff, 0x00, 0x13, 0x37, 0x42})
	f.Fuzz(func(t *testing.T, data []byte) {
		l := eventgen.FromBytes(data)
		sums := map[string]Summary{}
		for _, env := range l.Envs {
			s := sums[env.Thread]
			if s.Thread == "" {
				s = Empty(env.Thread)
			}
			before := s.Clone()
			next := Apply(s, env)
			if !reflect.DeepEqual(s, before) {
				t.Fatalf("Apply changed its input")
			}
			if again := Apply(next, env); !reflect.DeepEqual(again, next) {
				t.Fatalf("applying seq %d twice changed the summary", env.Seq)
			}
			sums[env.Thread] = next
		}
	})
}

// Redelivery never double-applies: the same envelope twice, or an older
// one after a newer, leaves the summary as it was.
func TestApply_redelivery(t *testing.T) {
	l := randomLog(3, eventgen.Config{Threads: 1, Events: 400})
	th := l.Envs[0].Thread
	var s Summary = Empty(th)
	for i, env := range l.Envs {
		once := Apply(s, env)
		if twice := Apply(once, env); !reflect.DeepEqual(once, twice) {
			t.Fatalf("event %d applied twice differs:\n%+v\n%+v", i, once, twice)
		}
		if i > 0 {
			if older := Apply(once, l.Envs[i/2]); !reflect.DeepEqual(once, older) {
				t.Fatalf("older event %d after %d changed the summary", i/2, i)
			}
		}
		s = once
	}
	if want := Fold(th, l.Envs); !reflect.DeepEqual(s, want) {
		t.Fatalf("incremental %+v\nfold %+v", s, want)
	}
}

// Apply is pure: the summary passed in is left as it was, slices included.
func TestApply_leavesInputUnchanged(t *testing.T) {
	l := randomLog(5, eventgen.Config{Threads: 1, Events: 600})
	th := l.Envs[0].Thread
	s := Empty(th)
	for _, env := range l.Envs {
		before := s.Clone()
		next := Apply(s, env)
		if !reflect.DeepEqual(s, before) {
			t.Fatalf("Apply of seq %d changed its input", env.Seq)
		}
		s = next
	}
}

// The status follows the active run and its requests.
func TestApply_status(t *testing.T) {
	l := eventgen.NewLog()
	w := eventgen.Writer{Thread: "T", Holder: "h1"}
	steps := []struct {
		env     func() events.Envelope
		status  Status
		pending int
	}{
		{func() events.Envelope { return l.Post(w.Post("m1", "hello")) }, StatusIdle, 1},
		{func() events.Envelope { e := l.CAS(w.Claimed(1)); w.ClaimSeq = e.Seq; return e }, StatusIdle, 1},
		{func() events.Envelope { return l.Fenced(w.Started("r1", 1)) }, StatusActive, 0},
		{func() events.Envelope { return l.CAS(w.Opened("r1", "q1")) }, StatusWaiting, 0},
		{func() events.Envelope { return l.Post(w.Post("m2", "yes")) }, StatusWaiting, 1},
		{func() events.Envelope { return l.Fenced(w.Answer("r1", "q1", 5)) }, StatusActive, 0},
		{func() events.Envelope { return l.CAS(w.Completed("r1")) }, StatusIdle, 0},
		{func() events.Envelope { return l.CAS(w.Released()) }, StatusIdle, 0},
	}
	s := Empty("T")
	for i, st := range steps {
		s = Apply(s, st.env())
		if s.Status != st.status || s.Pending != st.pending || s.Anomalies != 0 {
			t.Fatalf("step %d: %+v, want status %s, %d pending, no anomaly", i, s, st.status, st.pending)
		}
	}
	if !s.Released || s.Holder != "h1" || s.Runs != 1 || s.Messages != 2 || s.Taken != 5 || len(s.Answered) != 0 {
		t.Fatalf("final %+v", s)
	}
}

// An abandon that reaches the log after the run's own end changes nothing,
// as in projections.Thread; an abandon of a run that is not the newest is
// an anomaly.
func TestApply_abandonAfterOwnEnd(t *testing.T) {
	l := eventgen.NewLog()
	w := eventgen.Writer{Thread: "T", Holder: "h1"}
	l.Post(w.Post("m1", "hi"))
	w.ClaimSeq = l.CAS(w.Claimed(1)).Seq
	l.Fenced(w.Started("r1", 1))
	l.CAS(w.Completed("r1"))
	w2 := eventgen.Writer{Thread: "T", Holder: "h2"}
	w2.ClaimSeq = l.CAS(w2.Claimed(2)).Seq
	l.Fenced(w2.Abandoned("r1", w.ClaimSeq))
	l.Fenced(w2.Abandoned("r0", w.ClaimSeq))
	s := Fold("T", l.Envs)
	if want := FromThread(projections.Fold("T", l.Envs)); !reflect.DeepEqual(s, want) {
		t.Fatalf("summary %+v\nthread  %+v", s, want)
	}
	if s.Anomalies != 1 || s.LastRun != "r1" || s.LastRunStatus != "completed" || s.Status != StatusIdle {
		t.Fatalf("summary %+v", s)
	}
}

// A summary survives a JSON round trip unchanged: what the projector stores
// is what it loads.
func TestSummary_jsonRoundTrip(t *testing.T) {
	l := randomLog(9, eventgen.Config{Threads: 1, Events: 500})
	s := Fold(l.Envs[0].Thread, l.Envs)
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Summary
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip:\n%+v\n%+v", back, s)
	}
	t.Logf("summary of %d events is %d bytes of JSON", len(l.Envs), len(data))
}
