package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/summaries"
)

// Thread statuses, as `threads` shows them.
const (
	statusIdle    = string(summaries.StatusIdle)    // no run active
	statusActive  = string(summaries.StatusActive)  // a run is active
	statusWaiting = string(summaries.StatusWaiting) // the active run waits for an answer to a request
)

// threadSummary is one row of `threads`, and its JSON shape.
type threadSummary struct {
	Thread       string              `json:"thread"`
	Status       string              `json:"status"`
	Holder       string              `json:"holder"`     // "" when no claim is held
	LeaseLive    bool                `json:"lease_live"` // the holder's lease has not lapsed
	ClaimSeq     uint64              `json:"claim_seq"`
	ActiveRun    string              `json:"active_run"` // "" when none
	OpenRequests []summaries.Request `json:"open_requests"`
	Pending      int                 `json:"pending"`
	Messages     int                 `json:"messages"`
	Runs         int                 `json:"runs"`
	LastSeq      uint64              `json:"last_seq"`
	LastActivity *time.Time          `json:"last_activity"`
	Anomalies    int                 `json:"anomalies"`
}

func (a *app) threadsCommand() *cobra.Command {
	var (
		conn   connFlags
		bucket string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "threads",
		Short: "List threads with their status, holder, active run and pending messages",
		Long: `List every thread with its status, claim holder, active run, number of
pending messages and last activity.

Status is "idle" (no run active), "active" (a run is active) or "waiting"
(the active run waits for an answer to a request it opened). Holder is the
newest claim's holder, "-" once released, marked "(lapsed)" when its lease
has run out: its runner is gone or stalled, and the next runner to claim
the thread abandons its active run.

The summaries come from the thread-summaries read model (the KV bucket
--summaries-bucket, kept by the projector in 'artifactr serve'), caught up with the
events the projector has not applied yet, so the list is exact as of the
stream's last event. Before any projector has run, threads folds every
thread's events instead.

Ids longer than 32 characters are shortened in the table, around "…";
--json prints them whole, as an array of objects:
  [{"thread","status","holder","lease_live","claim_seq","active_run","open_requests",
    "pending","messages","runs","last_seq","last_activity","anomalies"}]`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, err := a.openRead(cmd.Context(), &conn)
			if err != nil {
				return err
			}
			defer store.Close()
			sums, err := a.listSummariesFrom(cmd.Context(), store, bucket)
			if err != nil {
				return storeError(conn.url, err)
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return errOrNil(enc.Encode(sums))
			}
			return errOrNil(writeSummaries(a.stdout, sums))
		},
	}
	addConnFlags(cmd, &conn)
	addSummariesBucketFlag(cmd, &bucket)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

// listSummaries summarises every thread, sorted by id, from the default
// read model when the store is a JetStream one.
func listSummaries(ctx context.Context, store events.Store) ([]threadSummary, error) {
	if ns, ok := store.(*natsstore.Store); ok {
		return (&app{log: slog.New(slog.DiscardHandler)}).listSummariesFrom(ctx, ns, summaries.DefaultBucket)
	}
	return foldSummaries(ctx, store)
}

// foldLagWarning is how far behind the read model may be before threads
// says that it folded the difference itself.
const foldLagWarning = 100_000

// listSummariesFrom reads the summaries in bucket, exact as of the
// stream's last event; without the bucket it folds every thread.
func (a *app) listSummariesFrom(ctx context.Context, store *natsstore.Store, bucket string) ([]threadSummary, error) {
	snap, err := summaries.Read(ctx, store, bucket)
	if errors.Is(err, summaries.ErrNoReadModel) {
		a.log.Debug("no thread-summaries read model yet; folding every thread", "bucket", bucket)
		return foldSummaries(ctx, store)
	}
	if err != nil {
		return nil, err
	}
	if snap.Folded > foldLagWarning {
		a.log.Warn("the thread-summaries read model is far behind; folded the difference here (is a projector running? see 'artifactr projections status')",
			"bucket", bucket, "folded", snap.Folded, "checkpoint", snap.Checkpoint.Seq)
	}
	out := make([]threadSummary, 0, len(snap.Summaries))
	for _, s := range snap.Summaries {
		out = append(out, fromSummary(s))
	}
	return out, withLeases(ctx, store, out)
}

// foldSummaries summarises every thread by folding its log.
func foldSummaries(ctx context.Context, store events.Store) ([]threadSummary, error) {
	ids, err := store.Threads(ctx)
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	sums := make([]threadSummary, 0, len(ids))
	for _, id := range ids {
		envs, err := store.Load(ctx, id, 1)
		if err == nil {
			err = projections.ResolveFirst(ctx, store, envs)
		}
		if err != nil {
			return nil, err
		}
		sums = append(sums, summarize(projections.Fold(id, envs)))
	}
	return sums, withLeases(ctx, store, sums)
}

// withLeases marks the held claims whose lease is live.
func withLeases(ctx context.Context, store events.Store, sums []threadSummary) error {
	for i := range sums {
		s := &sums[i]
		if s.Holder == "" {
			continue
		}
		l, live, err := store.GetLease(ctx, s.Thread)
		if err != nil {
			return err
		}
		s.LeaseLive = live && l.Holder == s.Holder
	}
	return nil
}

func summarize(t *projections.Thread) threadSummary {
	return fromSummary(summaries.FromThread(t))
}

// fromSummary is the row of a read-model summary.
func fromSummary(s summaries.Summary) threadSummary {
	row := threadSummary{
		Thread: s.Thread, Status: string(s.Status), ClaimSeq: s.ClaimSeq, ActiveRun: s.ActiveRun,
		OpenRequests: s.OpenRequests, Pending: s.Pending, Messages: s.Messages, Runs: s.Runs,
		LastSeq: s.LastSeq, Anomalies: s.Anomalies,
	}
	if s.ClaimSeq != 0 && !s.Released {
		row.Holder = s.Holder
	}
	if row.OpenRequests == nil {
		row.OpenRequests = []summaries.Request{}
	}
	if !s.LastActivity.IsZero() {
		la := s.LastActivity.UTC()
		row.LastActivity = &la
	}
	return row
}

// maxIDWidth is the widest id a table shows whole. Ids may be 128
// characters; one such would widen every row of the table.
const maxIDWidth = 32

// shortID is id as a table shows it: whole up to maxIDWidth characters,
// else its start and end around "…" (both ends, as ids often share a
// prefix). --json and show print ids whole.
func shortID(id string) string {
	r := []rune(id)
	if len(r) <= maxIDWidth {
		return id
	}
	head := (maxIDWidth - 1) / 2
	tail := maxIDWidth - 1 - head
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}

func writeSummaries(w io.Writer, sums []threadSummary) error {
	if len(sums) == 0 {
		_, err := fmt.Fprintln(w, "no threads")
		return err
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tSTATUS\tHOLDER\tACTIVE RUN\tPENDING\tMESSAGES\tRUNS\tLAST ACTIVITY")
	for _, s := range sums {
		last := "-"
		if s.LastActivity != nil {
			last = s.LastActivity.Local().Format(time.RFC3339)
		}
		holder := orDash(shortID(s.Holder))
		if s.Holder != "" && !s.LeaseLive {
			holder += " (lapsed)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", shortID(s.Thread), s.Status, holder, orDash(shortID(s.ActiveRun)),
			s.Pending, s.Messages, s.Runs, last)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var bad []string
	for _, s := range sums {
		if s.Anomalies > 0 {
			bad = append(bad, fmt.Sprintf("%s (%d)", s.Thread, s.Anomalies))
		}
	}
	if len(bad) > 0 {
		_, err := fmt.Fprintf(w, "anomalies in: %s; see 'artifactr show THREAD'\n", strings.Join(bad, ", "))
		return err
	}
	return nil
}
