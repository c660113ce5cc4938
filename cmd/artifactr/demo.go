package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/demo"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/audit"
)

// demoBudget bounds the whole demo, so that a fault makes it fail rather
// than hang.
const demoBudget = 50 * time.Second

func (a *app) demoCommand() *cobra.Command {
	var (
		ttl    time.Duration
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "A guided tour: runs, a request answered, and a claim lapse refused by the fence",
		Long: `Run a self-contained tour, with no setup: an embedded NATS server in a temporary
directory on a free loopback port, and a runner with the echo agent.

It posts to two threads, including an "ask:" prompt answered by a later
post, and shows every event live. Then it stages a claim lapse step by step:
holder A claims a thread and plans a run, stalls past its lease; holder B
takes the lapsed lease and starts the run; A wakes and sends its run_started,
which the fence refuses, writing nothing. It ends with the thread's state and
an audit of the whole log, which must be clean.

The data is thrown away at the end (and is not fsynced: nothing of it has to
survive). Exit 0 when every step went as told.

--json prints the tour on stderr and one object on stdout at the end:
{"ok"} and, when a step did not go as told, {"ok":false,"error"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ttl < 200*time.Millisecond || ttl > 10*time.Second {
				return usagef("--claim-ttl %s: want 200ms to 10s", ttl)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), demoBudget)
			defer cancel()
			var jsonOut io.Writer
			if asJSON {
				jsonOut = a.jsonMode()
			}
			err := a.demo(ctx, ttl)
			if asJSON {
				v := demoJSON{OK: err == nil}
				if err != nil {
					v.Error = err.Error()
				}
				if jerr := writeJSON(jsonOut, v); jerr != nil {
					return jerr
				}
			}
			if err != nil {
				return fail(fmt.Errorf("demo: %w", err))
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&ttl, "claim-ttl", 2*time.Second, "lease TTL of the demo's claims; the lapse takes this long")
	cmd.Flags().BoolVar(&asJSON, "json", false, "tell the tour on stderr; print one JSON object, the outcome, on stdout")
	return cmd
}

// demo runs the tour (internal/demo), ending it with the lapse thread, the
// threads and the audit as show, threads and audit print them.
func (a *app) demo(ctx context.Context, ttl time.Duration) error {
	return demo.Run(ctx, demo.Config{
		Out:        a.stdout,
		ClaimTTL:   ttl,
		Format:     formatEvent,
		Logger:     a.serverLogger(),
		NATSLogger: a.errorLogger(),
		Summary:    demoSummary,
	})
}

// demoSummary shows the lapse thread's state, every thread, and the audit.
func demoSummary(ctx context.Context, p *demo.Tour, store *natsstore.Store) error {
	envs, err := store.Load(ctx, demo.LapseThread, 1)
	if err != nil {
		return err
	}
	p.Say("")
	p.Say("== 5. The thread's final state (artifactr show gamma):")
	if err := p.Write(func(w io.Writer) error { return writeShow(w, projections.Fold(demo.LapseThread, envs)) }); err != nil {
		return err
	}
	sums, err := listSummaries(ctx, store)
	if err != nil {
		return err
	}
	p.Say("")
	p.Say("== 6. Every thread (artifactr threads):")
	if err := p.Write(func(w io.Writer) error { return writeSummaries(w, sums) }); err != nil {
		return err
	}
	r, err := auditStream(ctx, store, -1, 1, audit.Options{}, newProgress(nil))
	if err != nil {
		return err
	}
	p.Say("")
	p.Say("== 7. The audit replays the whole log and checks the invariants (artifactr audit):")
	if err := p.Write(r.WriteText); err != nil {
		return err
	}
	if !r.OK() {
		return fmt.Errorf("the audit found %d violations", r.ViolationCount)
	}
	p.Say("")
	p.Say("== Done: every message was consumed once, and the stale write was refused.")
	return nil
}
