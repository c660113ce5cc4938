package main

import (
	"encoding/json"
	"testing"

	"github.com/artifactr/artifactr/internal/bench"
)

// `bench turns --partitions 4 --runners 2 --json` runs two runners that
// divide four partitions and reports the server's deliveries: each event
// is delivered to one runner (issue 29 item 4), and to the bench's own
// follow once.
func TestRun_benchTurnsPartitions(t *testing.T) {
	code, out, errOut := runCLI(t, t.Context(), "bench", "turns", "--partitions", "4", "--runners", "2",
		"--threads", "8", "--messages", "3", "--claim-ttl", "2s", "--json")
	if code != exitOK {
		t.Fatalf("bench turns: exit %d\n%s%s", code, out, errOut)
	}
	var res bench.TurnsResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	d := res.Delivery
	if d == nil || d.Events == 0 || len(res.Phases) != 1 || res.Phases[0].Turns != 24 {
		t.Fatalf("figures missing: %s", out)
	}
	if d.PerEvent > 1 || d.ObserverPerEvent != 1 {
		t.Errorf("deliveries per event: runners %.2f (want at most 1), the bench's follow %.2f (want 1)", d.PerEvent, d.ObserverPerEvent)
	}
	t.Log(out)
}

// `bench scale --partitions 4 --runners 2 --json` claims every thread with
// two runners that divide four partitions, and each event is delivered to
// one of them (issue 29 item 4).
func TestRun_benchScalePartitions(t *testing.T) {
	code, out, errOut := runCLI(t, t.Context(), "bench", "scale", "--partitions", "4", "--runners", "2",
		"--threads", "40", "--idle", "0s", "--claim-ttl", "2s", "--json")
	if code != exitOK {
		t.Fatalf("bench scale: exit %d\n%s%s", code, out, errOut)
	}
	var res bench.ScaleResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	d := res.Delivery
	if d == nil || d.Events == 0 || res.Claimed != 40 || res.Partitions != 4 || res.Runners != 2 {
		t.Fatalf("figures missing: %s", out)
	}
	if d.PerEvent != 1 {
		t.Errorf("deliveries per event to the runners: %.2f, want 1", d.PerEvent)
	}
	t.Log(out)
}
