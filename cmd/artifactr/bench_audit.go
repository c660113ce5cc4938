package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/internal/bench"
)

// benchAuditFlags are `bench audit` options.
type benchAuditFlags struct {
	events  int
	threads int
	rounds  int
	seed    uint64
	maxTime time.Duration
	profile string // CPU profile of the reads, for tuning
	json    bool
	result  benchAuditJSON
}

// benchAudit runs the benchmark (internal/bench) with f's options.
func (a *app) benchAudit(ctx context.Context, f *benchAuditFlags) error {
	var err error
	f.result, err = bench.Audit(ctx, bench.AuditConfig{Events: f.events, Threads: f.threads, Rounds: f.rounds, Seed: f.seed,
		Profile: f.profile, Out: a.stdout, NATSLogger: a.errorLogger()})
	return err
}

func (a *app) benchAuditCommand() *cobra.Command {
	var f benchAuditFlags
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "The audit's events/s against the raw read rate of the same stream",
		Long: `Start an embedded server in a temporary directory (writes not fsynced) and
fill the stream with --events realistic events (about 256 bytes each) across
--threads threads, published asynchronously with the headers real appends
carry: claims, runs with outputs, requests answered by posts, steering,
failures, releases and takeovers that abandon runs. The log is clean, so the
audit must find no violation and no anomaly.

Then, --rounds times, read the whole stream twice with the same reader
(natsstore Replay: one ordered consumer, large pulls): once raw, touching
each message without decoding it, and once decoding every event and feeding
it to the audit (projections/audit), alternating which goes first. Prints
both rates, best of the rounds, their ratio, the median of the rounds'
ratios, and the rates per CPU-second of this process (the server is
embedded in it), which other load on the machine disturbs less. Figures
only: nothing is asserted but the audit's verdict.

--json prints the figures as one object at the end (the text lines go to
stderr): {"events","threads","raw_events_per_second",
"audit_events_per_second","ratio","violations","anomalies"}.`,
		Example: `  artifactr bench audit --events 1000000`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.events < 1 || f.threads < 1 || f.rounds < 1 {
				return usagef("--events, --threads and --rounds must be at least 1")
			}
			if f.maxTime <= 0 {
				return usagef("--max-time must be positive")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.maxTime)
			defer cancel()
			var jsonOut io.Writer
			if f.json {
				jsonOut = a.jsonMode()
			}
			if err := a.benchAudit(ctx, &f); err != nil {
				return fail(fmt.Errorf("bench audit: %w", err))
			}
			if f.json {
				return writeJSON(jsonOut, f.result)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.events, "events", 1_000_000, "events to generate")
	fl.IntVar(&f.threads, "threads", 1000, "threads the events are spread over")
	fl.IntVar(&f.rounds, "rounds", 5, "read the stream this many times each way, alternating which goes first; the best rate counts")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the generated log")
	fl.DurationVar(&f.maxTime, "max-time", 15*time.Minute, "give up after this long")
	fl.StringVar(&f.profile, "cpuprofile", "", "write a CPU profile of the reads to this file")
	_ = fl.MarkHidden("cpuprofile")
	fl.BoolVar(&f.json, "json", false, "print the figures as one JSON object")
	return cmd
}
