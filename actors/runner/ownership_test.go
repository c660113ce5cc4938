package runner_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections/audit"
)

// ownershipSettled reports whether the runners divide the n partitions:
// each owned by exactly one of them, each runner following exactly what
// it owns, and no runner owning more than ⌈n/R⌉.
func ownershipSettled(n int, rs ...*runner.Runner) func() (bool, string) {
	return func() (bool, string) {
		seen := make([]string, n)
		most := (n + len(rs) - 1) / len(rs)
		for _, r := range rs {
			owned, following := r.Partitions()
			if !slices.Equal(owned, following) || len(owned) > most {
				return false, fmt.Sprintf("%s owns %v, follows %v", r.ID(), owned, following)
			}
			for _, p := range owned {
				if seen[p] != "" {
					return false, fmt.Sprintf("partition %d owned by %s and %s", p, seen[p], r.ID())
				}
				seen[p] = r.ID()
			}
		}
		if i := slices.Index(seen, ""); i >= 0 {
			return false, fmt.Sprintf("partition %d owned by none: %v", i, seen)
		}
		return true, ""
	}
}

// Runners on a store of P partitions divide them: each partition is owned
// by one runner, which alone follows its stream and claims its threads.
// Posts to threads of every partition are consumed exactly once, after the
// runners settle, after one leaves gracefully (its partitions move), and
// after one is killed (its session and partition leases lapse).
func TestRunner_partitionOwnership(t *testing.T) {
	const n = 4
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	run := func(t *testing.T, s events.Store, work func() runner.WorkSource) {
		rng := rand.New(rand.NewPCG(seed, 0))
		var rs []*runner.Runner
		for i := range 3 {
			rs = append(rs, startRunner(t, runner.Config{Store: s, ID: fmt.Sprintf("r%d", i), ClaimTTL: 1500 * time.Millisecond,
				Work: work()})) // the idle timeout keeps threads held when partitions move

		}
		live := rs
		defer func() {
			for _, r := range live {
				r.Kill()
			}
		}()
		var all []string
		// A round posts twice to three threads of each partition, once
		// ownership settled, or at once with early: then the posts to a
		// killed runner's partitions wait for their next owner, which
		// must find them.
		round := func(name string, early bool) {
			t.Helper()
			if !early {
				testkit.WaitFor(t, 30*time.Second, name+": ownership settled", ownershipSettled(n, live...))
			}
			before := map[string][]int64{}
			for _, r := range live {
				for p := range n {
					before[r.ID()] = append(before[r.ID()], r.RoutedFrom(p))
				}
			}
			var threads []string
			per := make([]int, n)
			for len(threads) < 3*n {
				th := fmt.Sprintf("%s-%x", name, rng.Uint32())
				if p := events.Partition(th, n); per[p] < 3 {
					per[p]++
					threads = append(threads, th)
				}
			}
			for i := range 2 {
				for _, th := range threads {
					post(t, s, th, fmt.Sprintf("%s-%d", th, i))
				}
			}
			all = append(all, threads...)
			testkit.WaitFor(t, 60*time.Second, name+": every message answered", settled(t, s, threads...))
			testkit.WaitFor(t, 30*time.Second, name+": ownership settled", ownershipSettled(n, live...))
			if ok, why := ownershipSettled(n, live...)(); !ok {
				t.Fatalf("%s: ownership moved during the round: %s", name, why)
			}
			for _, r := range live {
				owned, _ := r.Partitions()
				for p := range n {
					d := r.RoutedFrom(p) - before[r.ID()][p]
					if own := slices.Contains(owned, p); own != (d > 0) {
						t.Fatalf("%s: %s owns %v and routed %d events of partition %d", name, r.ID(), owned, d, p)
					}
				}
			}
		}
		round("settle", false)
		// A graceful stop hands the partitions over: their threads are
		// held (the idle timeout is 30s), and their actors release them.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := live[2].Stop(ctx); err != nil {
			t.Fatal(err)
		}
		live = live[:2]
		round("leave", false)
		live[1].Kill()
		live = live[:1]
		round("kill", true)
		if err := live[0].Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		live = nil
		a := audit.NewWithOptions(audit.Options{Subjects: s.Subjects()})
		consumed := 0
		for _, th := range all {
			envs, err := s.Load(context.Background(), th, 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range envs {
				a.Add(e)
				if e.Type == events.TypeRunStarted {
					consumed++
				}
			}
		}
		if rep := a.Report(); !rep.OK() {
			t.Fatalf("audit: %+v", rep.Violations)
		}
		if consumed != 2*len(all) {
			t.Fatalf("%d runs started for %d messages", consumed, 2*len(all))
		}
	}
	t.Run("memstore", func(t *testing.T) {
		run(t, memstore.New(memstore.Config{Subjects: events.Subjects{Partitions: n}}), func() runner.WorkSource { return nil })
	})
	t.Run("natsstore", func(t *testing.T) {
		srv := natsembedtest.RunForTest(t)
		s, err := natsstore.New(t.Context(), natsstore.Config{URL: srv.ClientURL(), Partitions: n})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		run(t, s, func() runner.WorkSource {
			q, err := s.WorkQueue(t.Context(), "")
			if err != nil {
				t.Fatal(err)
			}
			return q
		})
	})
}
