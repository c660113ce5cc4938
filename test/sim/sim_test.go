package sim_test

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/projections/audit"
	"github.com/artifactr/artifactr/test/sim"
)

// Flags, each with an environment variable for CI (the flag wins).
var (
	flagSeeds = flag.Int("sim.seeds", envInt("SIM_SEEDS", 0), "sim: seeds to run (default 2000; 100 with -race or -short)")
	flagSteps = flag.Int("sim.steps", envInt("SIM_STEPS", 300), "sim: random steps per seed, before the drain")
	flagBase  = flag.String("sim.base", os.Getenv("SIM_BASE"), "sim: first seed (default: random, printed)")
	flagSeed  = flag.String("sim.seed", os.Getenv("SIM_SEED"), "sim: replay this one seed and print its trace")
	flagCtl   = flag.Int("sim.control", envInt("SIM_CONTROL", 0), "sim: seeds 1..N the unfenced control runs (default 200; 50 with -race or -short)")
	flagFence = flag.String("sim.fence", os.Getenv("SIM_FENCE"), "sim: the seeds' fence layout: claim, run, or seed (default: the seed's, eventstest.RunFenced)")
)

// layout is -sim.fence's layout.
func layout(t *testing.T) eventstest.Layout {
	t.Helper()
	return eventstest.FlagLayout(t, "-sim.fence", *flagFence)
}

// fenceArg is the -sim.fence that replays r's layout.
func fenceArg(r sim.Result) string {
	return " -sim.fence=" + eventstest.LayoutOf(r.RunFence).String()
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
		return 100
	}
	return 2000
}

func controlSeeds() int {
	switch {
	case *flagCtl > 0:
		return *flagCtl
	case raceOn || testing.Short():
		return 50
	}
	return 200
}

func baseSeed(t *testing.T) uint64 {
	if *flagBase == "" {
		return uint64(time.Now().UnixNano()) & (1<<40 - 1)
	}
	b, err := strconv.ParseUint(*flagBase, 10, 64)
	if err != nil {
		t.Fatalf("-sim.base %q: %v", *flagBase, err)
	}
	return b
}

func replayCmd(test string, seed uint64, steps int, extra string) string {
	return fmt.Sprintf("go test ./test/sim/ -run '^%s$' -sim.seed=%d -sim.steps=%d%s -v", test, seed, steps, extra)
}

// TestSim runs the simulation over many seeds, each with every check fatal.
func TestSim(t *testing.T) {
	cfg := sim.Config{Steps: *flagSteps, Layout: layout(t)}
	if *flagSeed != "" {
		seed, err := strconv.ParseUint(*flagSeed, 10, 64)
		if err != nil {
			t.Fatalf("-sim.seed %q: %v", *flagSeed, err)
		}
		replay(t, seed, cfg)
		return
	}
	base, n := baseSeed(t), seeds()
	t.Logf("base seed %d: seeds %d..%d, %d steps each, fence layout %s (set -sim.base=%d to rerun these seeds)", base, base, base+uint64(n)-1, cfg.Steps, cfg.Layout, base)
	var (
		total  sim.Stats
		steps  int
		evs    int
		modes  = map[memstore.Mode]int{}
		layout [2]sim.Stats // claim, run
		count  [2]int
	)
	ran, d, shards := runSeeds(t, base, n, cfg, func(_ uint64, r sim.Result) {
		steps += r.Steps + r.Stats.Drained
		evs += r.Events
		modes[r.Mode]++
		add(&total, r.Stats)
		l := 0
		if r.RunFence {
			l = 1
		}
		count[l]++
		add(&layout[l], r.Stats)
	}, func(t *testing.T, seed uint64, r sim.Result) { report(t, "TestSim", seed, cfg, r) })
	t.Logf("%d seeds in %s (%.0f seeds/s on %d shards): %d steps, %d events", ran, d.Round(time.Millisecond), float64(ran)/d.Seconds(), shards, steps, evs)
	t.Logf("exercised: %+v", total)
	for l, name := range []string{"claim", "run"} {
		t.Logf("fence on the %s subject: %d seeds, exercised %+v", name, count[l], layout[l])
	}
	if cfg.Layout == eventstest.LayoutBySeed && ran >= 4 && (count[0] == 0 || count[1] == 0) {
		t.Errorf("the seeds ran on one layout only: %v", count)
	}
	if ran >= 100 && total.Steered == 0 {
		t.Errorf("%d seeds gave no steering: the runs never asked for it", ran)
	}
	if ran >= 100 && (total.LateWrites == 0 || total.Drains == 0) {
		t.Errorf("%d seeds: %d appends landed late and %d cores drained: the resend of an unknown outcome went unexercised", ran, total.LateWrites, total.Drains)
	}
	t.Logf("log modes: %d seeds %s, %d seeds %s", modes[memstore.Single], memstore.Single, modes[memstore.Replicated], memstore.Replicated)
	if ran > 1 && (modes[memstore.Single] == 0 || modes[memstore.Replicated] == 0) {
		t.Errorf("the seeds ran in one log mode only: %v", modes)
	}
}

// runSeeds runs seeds base..base+n-1 with cfg over GOMAXPROCS parallel
// shards. take sees each result, one at a time; the first failed seed goes
// to fail and stops every shard. It returns how many seeds ran, in how
// long, on how many shards.
func runSeeds(t *testing.T, base uint64, n int, cfg sim.Config, take func(seed uint64, r sim.Result), fail func(t *testing.T, seed uint64, r sim.Result)) (ran int, d time.Duration, shards int) {
	var (
		stop atomic.Bool
		mu   sync.Mutex // serialises take, and protects ran
	)
	shards = runtime.GOMAXPROCS(0)
	start := time.Now()
	t.Run("seeds", func(t *testing.T) {
		for k := range shards {
			t.Run(fmt.Sprintf("shard%d", k), func(t *testing.T) {
				t.Parallel()
				for i := k; i < n && !stop.Load(); i += shards {
					seed := base + uint64(i)
					r := sim.Run(seed, cfg)
					mu.Lock()
					ran++
					take(seed, r)
					mu.Unlock()
					if r.Failed() {
						stop.Store(true)
						fail(t, seed, r)
						return
					}
				}
			})
		}
	})
	return ran, time.Since(start), shards
}

func add(t *sim.Stats, s sim.Stats) {
	t.Claims += s.Claims
	t.Appends += s.Appends
	t.Takeovers += s.Takeovers
	t.Fenced += s.Fenced
	t.Conflicts += s.Conflicts
	t.LostAcks += s.LostAcks
	t.FailWrites += s.FailWrites
	t.LateWrites += s.LateWrites
	t.Drains += s.Drains
	t.Crashes += s.Crashes
	t.Steered += s.Steered
	t.Runs += s.Runs
	t.DupObserve += s.DupObserve
	t.Drained += s.Drained
}

// replay runs one seed with its trace, and fails if a check broke.
func replay(t *testing.T, seed uint64, cfg sim.Config) {
	cfg.Trace = true
	r := sim.Run(seed, cfg)
	t.Logf("seed %d, fence on the run subject %v: %d steps, %d events, stats %+v\n%s", seed, r.RunFence, r.Steps, r.Events, r.Stats, r.FormatTrace())
	if r.Failed() {
		t.Fatalf("seed %d: %s: %s", seed, r.Check, r.Failure)
	}
}

// report replays a failing seed with its trace and fails t with it and the
// command that replays it.
func report(t *testing.T, test string, seed uint64, cfg sim.Config, r sim.Result) {
	t.Helper()
	cfg.Trace = true
	again := sim.Run(seed, cfg)
	if again.Check != r.Check || again.Failure != r.Failure {
		t.Errorf("seed %d is not deterministic: first %s: %s; replay %s: %s", seed, r.Check, r.Failure, again.Check, again.Failure)
	}
	t.Fatalf("seed %d failed at step %d: %s: %s\ntrace:\n%s\nreplay: %s",
		seed, again.Steps, again.Check, again.Failure, again.FormatTrace(), replayCmd(test, seed, cfg.Steps, fenceArg(r)))
}

// TestSim_unfencedControl is the mutation run: with the fence switched off
// (eventstest.Unfenced on every handle) the same simulation must break
// I1_ConsumedAtMostOnce or I3_OneActiveRun within a fixed range of seeds.
// Only those two count: without the fence headers FenceNewestClaim fails at
// the first consuming write, which would prove nothing about the invariants.
func TestSim_unfencedControl(t *testing.T) {
	unfencedControl(t, eventstest.LayoutClaim)
}

// TestSim_runFenceUnfencedControl is the control on the run subject's
// layout (RUNFENCE): the consuming writes' compare-and-set on the run
// subject dropped (eventstest.Unfenced), the other writes' kept. With
// -sim.seed it replays that seed on this layout.
func TestSim_runFenceUnfencedControl(t *testing.T) {
	unfencedControl(t, eventstest.LayoutRun)
}

func unfencedControl(t *testing.T, l eventstest.Layout) {
	cfg := sim.Config{Steps: *flagSteps, Unfenced: true, Layout: l, Fatal: func(c string) bool {
		return c == audit.CheckI1 || c == audit.CheckI3
	}}
	if *flagSeed != "" {
		seed, err := strconv.ParseUint(*flagSeed, 10, 64)
		if err != nil {
			t.Fatalf("-sim.seed %q: %v", *flagSeed, err)
		}
		cfg.Trace = true
		r := sim.Run(seed, cfg)
		t.Logf("seed %d unfenced: %s: %s\n%s", seed, r.Check, r.Failure, r.FormatTrace())
		return
	}
	n := controlSeeds()
	var first uint64
	broke := map[string]int{}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		r := sim.Run(seed, cfg)
		if !r.Failed() {
			continue
		}
		broke[r.Check]++
		if first == 0 {
			first = seed
		}
	}
	if first == 0 {
		t.Fatalf("without the fence, no seed in 1..%d broke I1 or I3: the simulation cannot fail", n)
	}
	cfg.Trace = true
	r := sim.Run(first, cfg)
	t.Logf("without the fence, on the %s layout, %d of seeds 1..%d break an invariant (by check: %v); the first, seed %d, breaks %s at step %d: %s\ntrace:\n%s\nreplay: %s",
		l, broke[audit.CheckI1]+broke[audit.CheckI3], n, broke, first, r.Check, r.Steps, r.Failure, r.FormatTrace(),
		replayCmd(t.Name(), first, cfg.Steps, ""))
}

// TestSim_deterministic runs one seed twice: the traces must match, or a
// printed seed would not replay.
// On each layout.
func TestSim_deterministic(t *testing.T) {
	for _, l := range []eventstest.Layout{eventstest.LayoutClaim, eventstest.LayoutRun} {
		cfg := sim.Config{Steps: *flagSteps, Trace: true, Layout: l}
		a, b := sim.Run(42, cfg), sim.Run(42, cfg)
		if a.FormatTrace() != b.FormatTrace() {
			t.Fatalf("seed 42 ran two ways on the %s layout:\n%s\n---\n%s", l, a.FormatTrace(), b.FormatTrace())
		}
		if len(a.Trace) < cfg.Steps {
			t.Fatalf("trace of %d lines for %d steps", len(a.Trace), cfg.Steps)
		}
	}
}

// TestSim_layoutBySeed: eventstest.LayoutBySeed runs half the seeds on each layout,
// and a seed on the claim layout does what it does with eventstest.LayoutClaim (the
// split draws nothing from the seed's PRNG).
func TestSim_layoutBySeed(t *testing.T) {
	eventstest.CheckLayoutBySeed(t, func(seed uint64, l eventstest.Layout) (bool, string) {
		r := sim.Run(seed, sim.Config{Steps: 100, Trace: true, Layout: l})
		return r.RunFence, r.FormatTrace()
	})
}
