package sim

import (
	"fmt"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/spec"
	"github.com/artifactr/artifactr/spec/spectest"
)

// The simulation's logs checked against the spec (spec.TraceValidator):
// every event of a fenced run must be a step the model allows, and without
// the fence some log must not be. Seeds 1..N, fixed, so a failure replays:
// go test ./test/sim/ -run TestSim_specTrace -v

// specLog runs seed and returns its whole log, drain included.
func specLog(seed uint64, cfg Config) ([]string, spec.TraceReport, Result) {
	w := newWorld(seed, cfg)
	w.run()
	w.res.Seed, w.res.Events, w.res.Trace = seed, len(w.envs), w.trace
	v := spec.NewTraceValidator()
	for _, e := range w.envs {
		v.Add(e)
	}
	var lines []string
	for _, e := range w.envs {
		lines = append(lines, fmt.Sprintf("%4d %s", e.Seq, describe(e.Event)))
	}
	return lines, v.Report(), w.res
}

func TestSim_specTrace_fencedLogsConform(t *testing.T) {
	n := uint64(200)
	if testing.Short() {
		n = 40
	}
	events := 0
	for seed := uint64(1); seed <= n; seed++ {
		log, rep, res := specLog(seed, Config{Steps: 300, Layout: eventstest.LayoutBySeed})
		if res.Failed() {
			t.Fatalf("seed %d: the simulation failed: %s: %s", seed, res.Check, res.Failure)
		}
		events += rep.Events
		if !rep.OK() {
			t.Fatalf("seed %d: %s\nlog:\n%s", seed, rep.Nonconforming[0], joinLines(log))
		}
	}
	t.Logf("seeds 1..%d: %d events, every one a step of the spec", n, events)
}

func TestSim_specTrace_unfencedLogFlagged(t *testing.T) {
	for _, l := range []eventstest.Layout{eventstest.LayoutClaim, eventstest.LayoutRun} {
		cfg := Config{Steps: 300, Unfenced: true, Layout: l, Fatal: func(string) bool { return false }}
		flagged := false
		for seed := uint64(1); seed <= 50 && !flagged; seed++ {
			_, rep, _ := specLog(seed, cfg)
			if !rep.OK() {
				t.Logf("seed %d without the fence, on the %s layout: %s", seed, l, rep.Nonconforming[0])
				flagged = true
			}
		}
		if !flagged {
			t.Fatalf("without the fence, on the %s layout, no log of seeds 1..50 was flagged: the trace validation cannot fail", l)
		}
	}
}

func joinLines(lines []string) string {
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}

// Issue 27, item 6: the plain audit and audit --spec share one rule set,
// so they flag the same threads of every log, and the model never refuses
// a step the rules accept: on the fenced seeds (nothing flagged) and on
// the unfenced ones (some threads flagged, by both).
func TestSim_oneVerdict_auditAndSpec(t *testing.T) {
	n := uint64(60)
	if testing.Short() {
		n = 20
	}
	logOf := func(seed uint64, cfg Config) []events.Envelope {
		w := newWorld(seed, cfg)
		w.run()
		return w.envs
	}
	for seed := uint64(1); seed <= n; seed++ {
		v := spectest.OneVerdict(logOf(seed, Config{Steps: 300, Layout: eventstest.LayoutBySeed}))
		for _, d := range v.Disagree {
			t.Errorf("seed %d: %s", seed, d)
		}
		if len(v.ByBoth) > 0 {
			t.Errorf("seed %d: a fenced log flagged: %v", seed, v.ByBoth)
		}
	}
	flagged := 0
	for seed := uint64(1); seed <= 50; seed++ {
		v := spectest.OneVerdict(logOf(seed, Config{Steps: 300, Unfenced: true, Layout: eventstest.LayoutBySeed, Fatal: func(string) bool { return false }}))
		for _, d := range v.Disagree {
			t.Errorf("seed %d without the fence: %s", seed, d)
		}
		flagged += len(v.ByBoth)
	}
	if flagged == 0 {
		t.Fatal("without the fence, no thread of seeds 1..50 was flagged: the comparison proves nothing")
	}
	t.Logf("fenced seeds 1..%d: no thread flagged by either; unfenced seeds 1..50: %d threads flagged by both, none by one alone", n, flagged)
}
