package runners_test

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/test/sim/runners"
)

// Flags, each with an environment variable for CI (the flag wins).
var (
	flagSeeds = flag.Int("runners.seeds", envInt("RUNNERS_SEEDS", 0), "seeds to run (default 2000; 200 with -race or -short)")
	flagSteps = flag.Int("runners.steps", envInt("RUNNERS_STEPS", 600), "random steps per seed before the faults stop")
	flagBase  = flag.String("runners.base", os.Getenv("RUNNERS_BASE"), "first seed (default: random, printed)")
	flagSeed  = flag.String("runners.seed", os.Getenv("RUNNERS_SEED"), "replay this one seed and print its trace")
	flagFence = flag.String("runners.fence", os.Getenv("RUNNERS_FENCE"), "the seeds' fence layout: claim, run, or seed (default: the seed's, eventstest.RunFenced)")
)

// layout is -runners.fence's layout.
func layout(t *testing.T) eventstest.Layout {
	t.Helper()
	return eventstest.FlagLayout(t, "-runners.fence", *flagFence)
}

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
	cfg := runners.Config{Steps: *flagSteps, Layout: layout(t)}
	if replayed(t, cfg, "") {
		return
	}
	base := baseSeed(t)
	n := seeds()
	t.Logf("base seed %d: seeds %d..%d, %d steps each, fence layout %s (-runners.base=%d reruns them)", base, base, base+uint64(n)-1, cfg.Steps, cfg.Layout, base)
	start := time.Now()
	var total [2]runners.Stats // per layout: claim, run
	var work, count [2]int
	var took [2]time.Duration
	for i := range n {
		seed := base + uint64(i)
		t0 := time.Now()
		r := runners.Run(seed, cfg)
		l := 0
		if r.RunFence {
			l = 1
		}
		took[l] += time.Since(t0)
		count[l]++
		add(&total[l], r.Stats)
		if r.Work {
			work[l]++
		}
		if r.Failed() {
			report(t, seed, cfg, r)
		}
	}
	d := time.Since(start)
	t.Logf("%d seeds in %s (%.0f/s)", n, d.Round(time.Millisecond), float64(n)/d.Seconds())
	for l, name := range []string{"claim", "run"} {
		t.Logf("fence on the %s subject: %d seeds in %s, %d with a work queue; exercised %+v", name, count[l], took[l].Round(time.Millisecond), work[l], total[l])
	}
	if cfg.Layout == eventstest.LayoutBySeed && n >= 4 && (count[0] == 0 || count[1] == 0) {
		t.Fatalf("the seeds ran on one layout only: %v", count)
	}
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
		again.FormatTrace(), fmt.Sprintf("go test ./test/sim/runners/ -run '^TestRunners$' -runners.seed=%d -runners.steps=%d -runners.fence=%s -v", seed, cfg.Steps, fenceFlag(r)))
}

// fenceFlag is the -runners.fence that replays r's layout.
func fenceFlag(r runners.Result) string {
	return eventstest.LayoutOf(r.RunFence).String()
}

// TestRunners_deterministic runs one seed twice: the traces must match.
// On each layout.
func TestRunners_deterministic(t *testing.T) {
	for _, l := range []eventstest.Layout{eventstest.LayoutClaim, eventstest.LayoutRun} {
		cfg := runners.Config{Steps: *flagSteps, Trace: true, Layout: l}
		a, b := runners.Run(42, cfg), runners.Run(42, cfg)
		if a.FormatTrace() != b.FormatTrace() {
			t.Fatalf("seed 42 ran two ways on the %s layout", l)
		}
	}
}

// TestRunners_layoutBySeed: eventstest.LayoutBySeed runs half the seeds on each
// layout, and a seed on the claim layout does what it does with
// eventstest.LayoutClaim (the split draws nothing from the seed's PRNG).
func TestRunners_layoutBySeed(t *testing.T) {
	eventstest.CheckLayoutBySeed(t, func(seed uint64, l eventstest.Layout) (bool, string) {
		r := runners.Run(seed, runners.Config{Steps: 100, Trace: true, Layout: l})
		return r.RunFence, r.FormatTrace()
	})
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
	t.Logf("seed %d%s, fence on the run subject %v: %d steps, %d events, stats %+v\n%s", seed, where, r.RunFence, r.Steps, r.Events, r.Stats, r.FormatTrace())
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
