package runners_test

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/artifactr/artifactr/test/sim/runners"
)

// Flags, each with an environment variable for CI (the flag wins).
var (
	flagSeeds = flag.Int("runners.seeds", envInt("RUNNERS_SEEDS", 0), "seeds to run (default 2000; 200 with -race or -short)")
	flagSteps = flag.Int("runners.steps", envInt("RUNNERS_STEPS", 600), "random steps per seed before the faults stop")
	flagBase  = flag.String("runners.base", os.Getenv("RUNNERS_BASE"), "first seed (default: random, printed)")
	flagSeed  = flag.String("runners.seed", os.Getenv("RUNNERS_SEED"), "replay this one seed and print its trace")
)

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

func seeds() int {
	switch {
	case *flagSeeds > 0:
		return *flagSeeds
	case raceOn || testing.Short():
		return 200
	}
	return 2000
}

// TestRunners runs the simulation over many seeds; the first that fails is
// replayed with its trace.
func TestRunners(t *testing.T) {
	cfg := runners.Config{Steps: *flagSteps}
	if replayed(t, cfg, "") {
		return
	}
	base := baseSeed(t)
	n := seeds()
	t.Logf("base seed %d: seeds %d..%d, %d steps each (-runners.base=%d reruns them)", base, base, base+uint64(n)-1, cfg.Steps, base)
	start := time.Now()
	var total runners.Stats
	work := 0
	for i := range n {
		seed := base + uint64(i)
		r := runners.Run(seed, cfg)
		add(&total, r.Stats)
		if r.Work {
			work++
		}
		if r.Failed() {
			report(t, seed, cfg, r)
		}
	}
	d := time.Since(start)
	t.Logf("%d seeds in %s (%.0f/s), %d with a work queue; exercised %+v", n, d.Round(time.Millisecond), float64(n)/d.Seconds(), work, total)
}

func add(t *runners.Stats, s runners.Stats) {
	t.Claims += s.Claims
	t.ClaimErrs += s.ClaimErrs
	t.Peeks += s.Peeks
	t.Spawns += s.Spawns
	t.Releases += s.Releases
	t.Reworks += s.Reworks
	t.Appends += s.Appends
	t.Fenced += s.Fenced
	t.LostAcks += s.LostAcks
	t.Fails += s.Fails
	t.Runs += s.Runs
	t.Steered += s.Steered
	t.Wakes += s.Wakes
	t.Redelivered += s.Redelivered
	t.Acks += s.Acks
	t.Freezes += s.Freezes
	t.Kills += s.Kills
	t.Joins += s.Joins
	t.SessionsLost += s.SessionsLost
	t.Rechecks += s.Rechecks
	t.KeptParked += s.KeptParked
	t.Consumed += s.Consumed
	t.SimExpiries += s.SimExpiries
	t.RealExpiries += s.RealExpiries
	t.Drained += s.Drained
}

// report replays a failing seed with its trace and fails t with it.
func report(t *testing.T, seed uint64, cfg runners.Config, r runners.Result) {
	t.Helper()
	cfg.Trace = true
	again := runners.Run(seed, cfg)
	if again.Check != r.Check || again.Failure != r.Failure {
		t.Errorf("seed %d is not deterministic: first %s: %s; replay %s: %s", seed, r.Check, r.Failure, again.Check, again.Failure)
	}
	t.Fatalf("seed %d failed at step %d: %s: %s\ntrace:\n%s\nreplay: %s", seed, again.Steps, again.Check, again.Failure,
		again.FormatTrace(), fmt.Sprintf("go test ./test/sim/runners/ -run '^TestRunners$' -runners.seed=%d -runners.steps=%d -v", seed, cfg.Steps))
}

// TestRunners_deterministic runs one seed twice: the traces must match.
func TestRunners_deterministic(t *testing.T) {
	cfg := runners.Config{Steps: *flagSteps, Trace: true}
	a, b := runners.Run(42, cfg), runners.Run(42, cfg)
	if a.FormatTrace() != b.FormatTrace() {
		t.Fatalf("seed 42 ran two ways")
	}
}

// replayed replays the seed -runners.seed names, with its trace, and
// reports whether there was one. where names the store in its lines.
func replayed(t *testing.T, cfg runners.Config, where string) bool {
	t.Helper()
	if *flagSeed == "" {
		return false
	}
	seed, err := strconv.ParseUint(*flagSeed, 10, 64)
	if err != nil {
		t.Fatalf("-runners.seed %q: %v", *flagSeed, err)
	}
	cfg.Trace = true
	r := runners.Run(seed, cfg)
	t.Logf("seed %d%s: %d steps, %d events, stats %+v\n%s", seed, where, r.Steps, r.Events, r.Stats, r.FormatTrace())
	if r.Failed() {
		t.Fatalf("seed %d%s: %s: %s", seed, where, r.Check, r.Failure)
	}
	return true
}

// baseSeed is the first seed: -runners.base, or one drawn from the clock.
func baseSeed(t *testing.T) uint64 {
	t.Helper()
	if *flagBase == "" {
		return uint64(time.Now().UnixNano()) & (1<<40 - 1)
	}
	b, err := strconv.ParseUint(*flagBase, 10, 64)
	if err != nil {
		t.Fatalf("-runners.base %q: %v", *flagBase, err)
	}
	return b
}
