package main

import (
	"encoding/json"
	"testing"

	"github.com/artifactr/artifactr/internal/bench"
)

// A small `bench scale --json` keeps the benchmark working: every thread is
// claimed and its run completed, the server holds only the runner's
// consumers, and every figure is filled in. The figures themselves are not
// asserted; the 100,000-thread run is a command:
// artifactr bench scale --threads 100000 --json.
func TestRun_benchScaleSmall(t *testing.T) {
	code, out, errOut := runCLI(t, t.Context(), "bench", "scale", "--threads", "200", "--idle", "200ms", "--json")
	if code != exitOK {
		t.Fatalf("bench scale: exit %d\n%s%s", code, out, errOut)
	}
	var res bench.ScaleResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	if res.Threads != 200 || res.Claimed != 200 || res.RunsCompleted != 200 {
		t.Errorf("threads %d, claimed %d, runs completed %d; want 200 each", res.Threads, res.Claimed, res.RunsCompleted)
	}
	if res.Consumers < 1 || res.Consumers > 10 {
		t.Errorf("consumers %d, want the runner's few", res.Consumers)
	}
	if res.ClaimsPerSecond <= 0 || res.LoadCPUMicrosPerThread <= 0 || res.RSSAfterBytes <= 0 || res.IdleSeconds <= 0 {
		t.Errorf("a figure is missing: %+v", res)
	}
	t.Log(out)
}
