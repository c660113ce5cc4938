package partitions_test

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/test/sim/partitions"
)

var (
	flagSeeds = flag.Int("partitions.seeds", envInt("PARTITIONS_SEEDS", 16), "seeds of the default run (about half a second each with -race)")
	flagBase  = flag.String("partitions.base", os.Getenv("PARTITIONS_BASE"), "first seed (default: random, printed)")
	flagSeed  = flag.String("partitions.seed", os.Getenv("PARTITIONS_SEED"), "replay this one seed with its trace")
	flagLarge = flag.Bool("partitions.large", os.Getenv("PARTITIONS_LARGE") != "", "run issue 29's scale: 10 runners, P = 64, posts over 1,000,000 thread ids")
	flagPosts = flag.Int("partitions.posts", envInt("PARTITIONS_POSTS", 0), "posts of the large run (default partitions.Large's)")
	flagFence = flag.String("partitions.fence", os.Getenv("PARTITIONS_FENCE"), "the seeds' fence layout: claim, run, or seed (default: the seed's, eventstest.RunFenced)")
)

// layout is -partitions.fence's layout.
func layout(t *testing.T) eventstest.Layout {
	t.Helper()
	return eventstest.FlagLayout(t, "-partitions.fence", *flagFence)
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

func baseSeed(t *testing.T) uint64 {
	t.Helper()
	if *flagBase == "" {
		return uint64(time.Now().UnixNano()) & (1<<40 - 1)
	}
	b, err := strconv.ParseUint(*flagBase, 10, 64)
	if err != nil {
		t.Fatalf("-partitions.base %q: %v", *flagBase, err)
	}
	return b
}

// TestPartitions runs a few seeds at the small scale; the first that fails
// is replayed with its trace.
func TestPartitions(t *testing.T) {
	cfg := partitions.Small()
	cfg.Layout = layout(t)
	if *flagSeed != "" {
		seed, err := strconv.ParseUint(*flagSeed, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Trace = true
		r := partitions.Run(seed, cfg)
		t.Logf("seed %d, fence on the run subject %v: %d steps, %d events, figures %+v\n%s", seed, r.RunFence, r.Steps, r.Events, r.Figures, r.FormatTrace())
		if r.Failed() {
			t.Fatalf("seed %d: %s: %s", seed, r.Check, r.Failure)
		}
		return
	}
	base := baseSeed(t)
	t.Logf("base seed %d (-partitions.base=%d reruns them)", base, base)
	for i := range *flagSeeds {
		seed := base + uint64(i)
		start := time.Now()
		r := partitions.Run(seed, cfg)
		if r.Failed() {
			report(t, seed, cfg, r)
		}
		t.Logf("seed %d (fence on the run subject %v) in %s: %d steps, %d events, %d posts to %d threads, %d fenced out, %d runs started by one of two believed owners (%d refused), %d membership changes moving %v partitions, %d acquisitions, owned %v (max/mean %.2f, bound %.2f), settled %s after the faults, max lag %s",
			seed, r.RunFence, time.Since(start).Round(time.Millisecond), r.Steps, r.Events, r.Figures.Posts, r.Figures.Threads, r.Figures.Fenced, r.Figures.Shared, r.Figures.SharedRefused,
			r.Figures.Changes, r.Figures.Moved, r.Figures.Acquired, r.Figures.Owned, r.Figures.Balance, r.Figures.BalanceBound, r.Figures.Settle, r.Figures.MaxLag)
	}
}

func report(t *testing.T, seed uint64, cfg partitions.Config, r partitions.Result) {
	t.Helper()
	cfg.Trace = true
	again := partitions.Run(seed, cfg)
	if again.Check != r.Check || again.Failure != r.Failure {
		t.Errorf("seed %d is not deterministic: %s: %s; replay %s: %s", seed, r.Check, r.Failure, again.Check, again.Failure)
	}
	tr := again.Trace
	if len(tr) > 400 {
		tr = tr[len(tr)-400:]
	}
	fence := eventstest.LayoutOf(r.RunFence)
	t.Fatalf("seed %d failed at step %d: %s: %s\ntrace (last %d lines):\n%s\nreplay: go test ./test/sim/partitions/ -run '^TestPartitions$' -partitions.seed=%d -partitions.fence=%s -v",
		seed, again.Steps, again.Check, again.Failure, len(tr), partitions.Result{Trace: tr}.FormatTrace(), seed, fence)
}

// TestPartitions_deterministic runs one seed twice: the traces must match.
// On each layout.
func TestPartitions_deterministic(t *testing.T) {
	for _, l := range []eventstest.Layout{eventstest.LayoutClaim, eventstest.LayoutRun} {
		cfg := partitions.Small()
		cfg.Trace, cfg.Layout = true, l
		a, b := partitions.Run(42, cfg), partitions.Run(42, cfg)
		if a.FormatTrace() != b.FormatTrace() || a.Events != b.Events {
			t.Fatalf("seed 42 ran two ways on the %s layout", l)
		}
	}
}

// TestPartitions_large is issue 29's scale, behind -partitions.large.
func TestPartitions_large(t *testing.T) {
	if !*flagLarge {
		t.Skip("issue 29's scale: -partitions.large (or PARTITIONS_LARGE=1)")
	}
	cfg := partitions.Large()
	cfg.Layout = layout(t)
	if *flagPosts > 0 {
		cfg.Posts = *flagPosts
	}
	seed := baseSeed(t)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	r := partitions.Run(seed, cfg)
	d := time.Since(start)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if r.Failed() {
		t.Fatalf("seed %d: %s: %s", seed, r.Check, r.Failure)
	}
	fg := r.Figures
	sum, least := 0, 0.0
	var by [2]struct {
		n, moved int
		least    float64
	}
	for i, m := range fg.Moved {
		sum += m
		least += fg.Least[i]
		k := 0
		if fg.Grew[i] {
			k = 1
		}
		by[k].n++
		by[k].moved += m
		by[k].least += fg.Least[i]
	}
	for k, what := range []string{"leaves and lapses", "joins and rejoins"} {
		if b := by[k]; b.n > 0 {
			t.Logf("%d %s moved %.1f partitions each, %.2f times the least", b.n, what, float64(b.moved)/float64(b.n), float64(b.moved)/b.least)
		}
	}
	t.Logf("seed %d, fence on the run subject %v, %+v", seed, r.RunFence, cfg)
	t.Logf("%s wall, %.0f MiB allocated in all, heap %.0f MiB at the end; %d steps, %d events; %d posts to %d threads, all consumed once; %d fenced out; %d runs started while two runners believed they owned the partition, %d of them refused by the fence; simulated %s",
		d.Round(time.Millisecond), float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), float64(after.HeapAlloc)/(1<<20), r.Steps, r.Events, fg.Posts, fg.Threads, fg.Fenced, fg.Shared, fg.SharedRefused, fg.SimTime.Round(time.Second))
	t.Logf("%d membership changes moved %v partitions (%.1f a change, %.2f times the least, P/R); %d partition acquisitions in all; the cores' counters %+v",
		fg.Changes, fg.Moved, float64(sum)/float64(max(fg.Changes, 1)), float64(sum)/max(least, 1), fg.Acquired, fg.Core)
	t.Logf("at the end %d runners own %v: max/mean %.3f, bound ⌈P/R⌉/(P/R) = %.3f; settled %s after the faults stopped, max lag %s (bound %s)",
		len(fg.Owned), fg.Owned, fg.Balance, fg.BalanceBound, fg.Settle, fg.MaxLag, partitions.Bound)
}
