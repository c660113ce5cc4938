package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/internal/bench"
)

// scaleFlags are `bench scale` options.
type scaleFlags struct {
	threads  int
	sync     bool
	idle     time.Duration
	json     bool
	maxTime  time.Duration
	claimTTL time.Duration
	posters  int
	profile  string
	memprof  string
	// partitions and runners: the store's partition count, and how many
	// runners share (with partitions, divide) the threads.
	partitions, runners int
}

func (a *app) benchScaleCommand() *cobra.Command {
	var f scaleFlags
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "What claimed idle threads cost: memory, consumers, idle CPU and traffic",
		Long: `Start an embedded server in a temporary directory and one runner with the
echo agent and an idle timeout long enough that no claim is given up; post
once to each of --threads threads (--posters at a time, over a connection
of their own, as clients), wait until every run has ended and the
runner has followed the whole log, collect the garbage the load left, then
idle for --idle while measuring.

Reports the claim rate, the memory each claimed thread costs (process RSS
after minus before, divided by the threads; server and runner are one
process, and the Go heap is returned to the OS before each reading), the
JetStream consumers on the server while idle, the process CPU while idle as
a percentage of one core, and the server's own message counters (in + out)
per second while idle. Figures only: nothing is asserted.

--partitions P and --runners R run R runners on a store of P partition
streams (with P > 1 they divide the partitions between them), and report
what the server delivered to the runners per event stored while the
threads were posted, claimed and run ("delivery" in --json, from the
partition streams' consumer info).`,
		Example: `  artifactr bench scale --threads 10000
  artifactr bench scale --threads 100000 --json
  artifactr bench scale --threads 10000 --partitions 8 --runners 4 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.threads < 1 || f.posters < 1 {
				return usagef("--threads and --posters must be at least 1")
			}
			if f.partitions < 1 || f.runners < 1 {
				return usagef("--partitions and --runners must be at least 1")
			}
			if f.maxTime <= 0 || f.claimTTL <= 0 || f.idle < 0 {
				return usagef("--max-time and --claim-ttl must be positive, --idle not negative")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.maxTime)
			defer cancel()
			if err := a.benchScale(ctx, &f); err != nil {
				return fail(fmt.Errorf("bench scale: %w", err))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.threads, "threads", 10000, "threads to post to, once each")
	fl.BoolVar(&f.sync, "sync", false, "fsync every JetStream write, as serve does by default")
	fl.DurationVar(&f.idle, "idle", 10*time.Second, "how long to measure the idle claimed threads")
	fl.BoolVar(&f.json, "json", false, "print one JSON object")
	fl.DurationVar(&f.maxTime, "max-time", 15*time.Minute, "give up after this long")
	fl.DurationVar(&f.claimTTL, "claim-ttl", 10*time.Second, "the runner's session TTL")
	fl.IntVar(&f.posters, "posters", 64, "concurrent posters")
	fl.IntVar(&f.partitions, "partitions", 1, "partition streams of the store; with more than one the runners divide them")
	fl.IntVar(&f.runners, "runners", 1, "runners sharing the threads")
	fl.StringVar(&f.profile, "cpuprofile", "", "write a CPU profile of the posting and claiming to this file")
	_ = fl.MarkHidden("cpuprofile")
	fl.StringVar(&f.memprof, "memprofile", "", "write a heap profile after the idle phase to this file")
	_ = fl.MarkHidden("memprofile")
	return cmd
}

// benchScale runs the benchmark (internal/bench) with f's options and
// prints its figures.
func (a *app) benchScale(ctx context.Context, f *scaleFlags) error {
	cfg := bench.ScaleConfig{Threads: f.threads, Posters: f.posters, Sync: f.sync, Idle: f.idle, ClaimTTL: f.claimTTL,
		CPUProfile: f.profile, MemProfile: f.memprof, Logger: a.errorLogger(), Partitions: f.partitions, Runners: f.runners}
	if !f.json {
		cfg.Progress = a.stderr
	}
	res, err := bench.Scale(ctx, cfg)
	if err != nil {
		return err
	}
	if f.json {
		b, _ := json.Marshal(res)
		fmt.Fprintln(a.stdout, string(b))
		return nil
	}
	fmt.Fprintf(a.stdout, "threads:   %d posted, %d claimed and held, %d runs completed\n", res.Threads, res.Claimed, res.RunsCompleted)
	fmt.Fprintf(a.stdout, "claims:    %.0f/s (all claimed %.1fs after the first post; all runs ended after %.1fs)\n", res.ClaimsPerSecond, res.AllClaimedSeconds, res.AllRunsEndedSeconds)
	fmt.Fprintf(a.stdout, "load CPU:  %.0f µs per thread (post, claim and run, runner and server)\n", res.LoadCPUMicrosPerThread)
	fmt.Fprintf(a.stdout, "memory:    %.0f bytes per claimed thread (RSS %s -> %s, runner and server in one process)\n", res.BytesPerThread, bench.MiB(res.RSSBeforeBytes), bench.MiB(res.RSSAfterBytes))
	fmt.Fprintf(a.stdout, "consumers: %d on the server while idle\n", res.Consumers)
	fmt.Fprintf(a.stdout, "idle:      %.1f%% of one core, %.0f server msgs/s (in+out) over %.0fs\n", res.IdleCPUPercent, res.ServerMsgsPerSecond, res.IdleSeconds)
	if d := res.Delivery; d != nil {
		fmt.Fprintf(a.stdout, "delivery:  %.2f messages to the runners per event stored (%d partitions, %d runners; follows %.2f, work queue %.2f)\n",
			d.PerEvent, res.Partitions, res.Runners, d.FollowPerEvent, d.WorkPerEvent)
	}
	return nil
}
