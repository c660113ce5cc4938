package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"artifactr/events"
	"artifactr/projections"
)

// Thread statuses, as `threads` shows them.
const (
	statusIdle    = "idle"    // no run active
	statusActive  = "active"  // a run is active
	statusWaiting = "waiting" // the active run waits for an answer to a request
)

// threadSummary is one row of `threads`, and its JSON shape.
type threadSummary struct {
	Thread       string     `json:"thread"`
	Status       string     `json:"status"`
	Holder       string     `json:"holder"`     // "" when no claim is held
	LeaseLive    bool       `json:"lease_live"` // the holder's lease has not lapsed
	ClaimSeq     uint64     `json:"claim_seq"`
	ActiveRun    string     `json:"active_run"` // "" when none
	Pending      int        `json:"pending"`
	Messages     int        `json:"messages"`
	Runs         int        `json:"runs"`
	LastSeq      uint64     `json:"last_seq"`
	LastActivity *time.Time `json:"last_activity"`
	Anomalies    int        `json:"anomalies"`
}

func (a *app) threadsCommand() *cobra.Command {
	var (
		conn   connFlags
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

--json prints an array of objects:
  [{"thread","status","holder","lease_live","claim_seq","active_run","pending","messages",
    "runs","last_seq","last_activity","anomalies"}]`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, err := a.open(cmd.Context(), &conn, 0)
			if err != nil {
				return err
			}
			defer store.Close()
			sums, err := listSummaries(cmd.Context(), store)
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
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

// listSummaries summarises every thread, sorted by id. It folds each
// thread's log; a read model fed by a durable consumer can replace it
// without changing its callers.
func listSummaries(ctx context.Context, store events.Store) ([]threadSummary, error) {
	ids, err := store.Threads(ctx)
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	sums := make([]threadSummary, 0, len(ids))
	for _, id := range ids {
		envs, err := store.Load(ctx, id, 1)
		if err != nil {
			return nil, err
		}
		s := summarize(projections.Fold(id, envs))
		if s.Holder != "" {
			l, live, err := store.GetLease(ctx, id)
			if err != nil {
				return nil, err
			}
			s.LeaseLive = live && l.Holder == s.Holder
		}
		sums = append(sums, s)
	}
	return sums, nil
}

func summarize(t *projections.Thread) threadSummary {
	s := threadSummary{
		Thread: t.ID, Status: statusIdle, ClaimSeq: t.Claim.Seq, Pending: len(t.Pending()),
		Messages: len(t.Messages), Runs: len(t.Runs), LastSeq: t.LastSeq, Anomalies: len(t.Anomalies),
	}
	if t.Claim.Seq != 0 && !t.Claim.Released {
		s.Holder = t.Claim.Holder
	}
	if r := t.ActiveRun; r != nil {
		s.ActiveRun, s.Status = r.ID, statusActive
		if len(t.OpenRequests()) > 0 {
			s.Status = statusWaiting
		}
	}
	if !t.LastActivity.IsZero() {
		la := t.LastActivity.UTC()
		s.LastActivity = &la
	}
	return s
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
		holder := orDash(s.Holder)
		if s.Holder != "" && !s.LeaseLive {
			holder += " (lapsed)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", s.Thread, s.Status, holder, orDash(s.ActiveRun),
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
