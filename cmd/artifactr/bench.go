package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/bench"
)

func (a *app) benchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure artifactr on an embedded server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(a.stderr)
			_ = cmd.Help()
			return silent(exitUsage, fmt.Errorf("bench needs a subcommand"))
		},
	}
	cmd.AddCommand(a.benchTurnsCommand(), a.benchAuditCommand(), a.benchScaleCommand(), a.benchHTTPCommand(), a.benchLongCommand())
	return cmd
}

// benchFlags are `bench turns` options.
type benchFlags struct {
	threads, messages int
	sync              bool
	closedLoop        bool
	noSync            bool
	maxTime           time.Duration
	claimTTL          time.Duration
	json              bool
	partitions        int
	runners           int
	guard             string
	fence             string
}

// errorLogger logs errors only, to stderr: the embedded servers, stores
// and runners of bench and demo speak up only when something fails.
func (a *app) errorLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// jsonMode makes a command's text lines go to stderr, as progress, and
// returns where its --json document goes: stdout.
func (a *app) jsonMode() io.Writer {
	out := a.stdout
	a.stdout = a.stderr
	return out
}

func (a *app) benchTurnsCommand() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "turns",
		Short: "Turns per second and latencies with the echo agent, against raw JetStream appends",
		Long: `Start an embedded server in a temporary directory (writes not fsynced unless
--sync) and one runner with the echo agent; post --messages messages to each
of --threads threads, all at once, and follow the stream until every turn has
ended.

With --closed-loop it measures the chat shape instead (see the flag).

Prints turns/s, events/s, and the p50 and p99 latency from a message's post
to its run_started and to its run's end, measured with the server's stored
times. Then it measures plain JetStream publishes of the same number and size
of events, with as many concurrent publishers as threads, each waiting for
its ack, and prints the ratio. Figures only: nothing is asserted.

--fence and --guard choose how the store fences consuming writes (serve's
--fence for a new stream, and its --guard), so their costs can be compared
in one run.

--json prints the figures as one object at the end (the text lines go to
stderr): {"mode","fsync","fence","phases":[{"name","threads","turns",
"turns_per_second","events","events_per_second","cpu_ms_per_turn",
"start_p50_ms","start_p99_ms","end_p50_ms","end_p99_ms"}],
"raw_appends_per_second","events_per_raw_ratio","delivery":{"events",
"deliveries_per_event","follow_deliveries_per_event",
"work_deliveries_per_event","observer_deliveries_per_event",
"out_msgs_per_event"}}.

--partitions P and --runners R run R runners on a store of P partition
streams. deliveries_per_event is what the partition streams' consumers
delivered to the runners per event stored, from the server's consumer
info; out_msgs_per_event is the server's whole out_msgs (it also counts
publish acks, API replies, the lease watch and the bench's own follow).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.threads < 1 || f.messages < 1 {
				return usagef("--threads and --messages must be at least 1")
			}
			if f.maxTime <= 0 || f.claimTTL <= 0 {
				return usagef("--max-time and --claim-ttl must be positive")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.maxTime)
			defer cancel()
			var jsonOut io.Writer
			if f.json {
				jsonOut = a.jsonMode()
			}
			if f.partitions < 1 || f.runners < 1 {
				return usagef("--partitions and --runners must be at least 1")
			}
			if f.closedLoop && (f.partitions > 1 || f.runners > 1) {
				return usagef("--partitions and --runners are for the open mode, not --closed-loop")
			}
			guard, err := natsstore.ParseGuardMode(f.guard)
			if err != nil {
				return usagef("--guard: %v", err)
			}
			fence, err := natsstore.ParseFenceLayout(f.fence)
			if err != nil {
				return usagef("--fence %v", err)
			}
			cfg := bench.TurnsConfig{Threads: f.threads, Messages: f.messages, Sync: f.sync, ClaimTTL: f.claimTTL,
				Partitions: f.partitions, Runners: f.runners, Guard: guard, Fence: fence,
				Out: a.stdout, Logger: a.errorLogger(), TraceConsole: a.stderr}
			run := bench.Turns
			if f.closedLoop {
				cfg.Sync, run = !f.noSync, bench.ClosedLoop
			}
			res, err := run(ctx, cfg)
			if err != nil {
				return fail(fmt.Errorf("bench: %w", err))
			}
			if f.json {
				return writeJSON(jsonOut, res)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.threads, "threads", 8, "threads to post to")
	fl.IntVar(&f.messages, "messages", 50, "messages per thread")
	fl.BoolVar(&f.sync, "sync", false, "fsync every JetStream write, as serve does by default")
	fl.BoolVar(&f.closedLoop, "closed-loop", false, "the chat shape: each thread posts its next message after its last run ended, then one thread runs 200 turns in sequence (fsync on unless --no-sync)")
	fl.BoolVar(&f.noSync, "no-sync", false, "with --closed-loop: do not fsync")
	fl.DurationVar(&f.maxTime, "max-time", 5*time.Minute, "give up after this long")
	fl.DurationVar(&f.claimTTL, "claim-ttl", 10*time.Second, "the runner's lease TTL")
	fl.IntVar(&f.partitions, "partitions", 1, "partition streams of the store; with more than one the runners divide them")
	fl.IntVar(&f.runners, "runners", 1, "runners sharing the work")
	fl.StringVar(&f.guard, "guard", string(natsstore.GuardAuto), "the store's guard of consuming writes in the claim fence layout, as serve's --guard: auto, on or off")
	fl.StringVar(&f.fence, "fence", string(natsstore.FenceRun), "the store's fence layout, as serve's for a new stream: run or claim")
	fl.BoolVar(&f.json, "json", false, "print the figures as one JSON object")
	return cmd
}
