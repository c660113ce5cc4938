package main

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain lets this test binary stand in for artifactr as bench http's
// client process, which the command starts from its own executable.
func TestMain(m *testing.M) {
	if os.Getenv(benchClientEnv) == "1" {
		os.Exit(runIO(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestBenchHTTP_json(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, out, errOut := runCLI(t, ctx, "bench", "http", "--threads", "3", "--messages", "4", "--rounds", "2", "--no-sync", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res benchHTTPJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	if res.Fsync {
		t.Error("fsync reported on with --no-sync")
	}
	want := []string{"nats-direct #1", "http #1", "nats-direct #2", "http #2", "nats-direct #3"}
	if len(res.Phases) != len(want) {
		t.Fatalf("phases %+v, want %v", res.Phases, want)
	}
	for i, p := range res.Phases {
		if p.Name != want[i] || p.Turns != 12 || p.TurnsPerSecond <= 0 {
			t.Errorf("phase %d: %+v, want %s with 12 turns at a rate", i, p, want[i])
		}
	}
	nd := []float64{res.Phases[0].TurnsPerSecond, res.Phases[2].TurnsPerSecond, res.Phases[4].TurnsPerSecond}
	slices.Sort(nd)
	web := (res.Phases[1].TurnsPerSecond + res.Phases[3].TurnsPerSecond) / 2
	if res.NATSDirectTurnsPerSecond != nd[1] || res.HTTPTurnsPerSecond != web {
		t.Errorf("medians %f and %f, want %f (http) and %f (nats-direct)", res.HTTPTurnsPerSecond, res.NATSDirectTurnsPerSecond, web, nd[1])
	}
	if got := web / nd[1]; res.Ratio < got*0.999 || res.Ratio > got*1.001 {
		t.Errorf("ratio %f, want the medians' %f", res.Ratio, got)
	}
	if res.HTTPServerCPUMsPerTurn <= 0 || res.HTTPClientCPUMsPerTurn <= 0 {
		t.Errorf("CPU per turn: server %f, client %f", res.HTTPServerCPUMsPerTurn, res.HTTPClientCPUMsPerTurn)
	}
}

func TestBenchHTTP_badCounts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, _, errOut := runCLI(t, ctx, "bench", "http", "--threads", "0", "--json")
	if code == 0 || !strings.Contains(errOut, "--threads, --messages and --rounds must each be at least 1") {
		t.Fatalf("exit %d, stderr %q: want a clear error", code, errOut)
	}
}
