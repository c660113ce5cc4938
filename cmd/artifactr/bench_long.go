package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/internal/bench"
)

// longFlags are `bench long` options.
type longFlags struct {
	events, turns, posts int
	json                 bool
	maxTime              time.Duration
}

func (a *app) benchLongCommand() *cobra.Command {
	var f longFlags
	cmd := &cobra.Command{
		Use:   "long",
		Short: "A thread of --events events against a fresh one: turn rate, post latency, claim time, memory, snapshot",
		Long: `Build one thread of --events events (posts and echo turns, written
directly, with fsync off), restart the embedded server with fsync on, and
measure on it and on a fresh thread in the same run:

  - the closed-loop turn rate and p50/p99 (--turns turns each, in blocks
    of ten taken in turn on the two threads, so both see the same load);
  - a plain post's client-side latency on each thread (--posts posts
    each, taken in turn, naming no strategy,
    through the reject check's path, as artifactr post does), and on
    the long thread with each post made once the previous one's run
    ended;
  - the claim after the restart: from the first post's stored time to its
    run_started (the claim, its replay, and the start);
  - the runner's heap held for the long thread beyond a fresh one (after
    a GC, both claimed and idle);
  - the size of the long thread's snapshot, as the runners save it;
  - show of the long thread (its newest 50 messages) and show --all: the
    median time of three and the events each read.

Figures only: nothing is asserted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.events < 10 || f.turns < 1 || f.posts < 1 || f.maxTime <= 0 {
				return usagef("--events must be at least 10, --turns, --posts and --max-time positive")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.maxTime)
			defer cancel()
			rep, err := a.benchLong(ctx, &f)
			if err != nil {
				return fail(fmt.Errorf("bench long: %w", err))
			}
			if f.json {
				enc := json.NewEncoder(a.stdout)
				return enc.Encode(rep)
			}
			fmt.Fprintf(a.stdout, "bench long: %d events built in %.1fs\n", rep.Events, rep.BuildSeconds)
			fmt.Fprintf(a.stdout, "turns:    long %.0f/s (p50 %.2f ms, p99 %.2f ms), fresh %.0f/s (p50 %.2f ms, p99 %.2f ms), ratio %.2f\n",
				rep.TurnsPerSecondLong, rep.TurnP50MsLong, rep.TurnP99MsLong, rep.TurnsPerSecondFresh, rep.TurnP50MsFresh, rep.TurnP99MsFresh, rep.TurnRatio)
			fmt.Fprintf(a.stdout, "post:     p50 %.2f ms, p99 %.2f ms (client side, no --strategy); fresh thread p50 %.2f ms, ratio %.2f\n",
				rep.PostP50Ms, rep.PostP99Ms, rep.PostP50MsFresh, rep.PostRatio)
			fmt.Fprintf(a.stdout, "          each after the previous post's run ended: p50 %.2f ms, p99 %.2f ms\n",
				rep.PostP50MsSettled, rep.PostP99MsSettled)
			fmt.Fprintf(a.stdout, "claim:    %.1f ms after a restart\n", rep.ClaimMs)
			fmt.Fprintf(a.stdout, "memory:   %d bytes of heap held for the long thread beyond a fresh one\n", rep.HeldBytes)
			fmt.Fprintf(a.stdout, "snapshot: %d bytes\n", rep.SnapshotBytes)
			fmt.Fprintf(a.stdout, "show:     %.1f ms, %d events read (newest %d messages); --all %.1f ms, %d events read\n",
				rep.ShowMs, rep.ShowEvents, rep.ShowLast, rep.ShowAllMs, rep.ShowAllEvents)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.events, "events", 100_000, "events in the long thread")
	fl.IntVar(&f.turns, "turns", 200, "closed-loop turns measured on each thread")
	fl.IntVar(&f.posts, "posts", 200, "plain posts measured on each thread, long and fresh in turn")
	fl.BoolVar(&f.json, "json", false, "print one JSON object")
	fl.DurationVar(&f.maxTime, "max-time", 30*time.Minute, "give up after this long")
	return cmd
}

// benchLong runs the benchmark (internal/bench) with f's options.
func (a *app) benchLong(ctx context.Context, f *longFlags) (*bench.LongReport, error) {
	return bench.Long(ctx, bench.LongConfig{Events: f.events, Turns: f.turns, Posts: f.posts, Logger: a.errorLogger()})
}
