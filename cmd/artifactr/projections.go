package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections/summaries"
)

// projFlags are the options shared by the projections commands.
type projFlags struct {
	conn      connFlags
	bucket    string
	durable   string
	partition int // -1: every partition
}

func addProjFlags(cmd *cobra.Command, f *projFlags) {
	addConnFlags(cmd, &f.conn)
	addSummariesBucketFlag(cmd, &f.bucket)
	cmd.Flags().StringVar(&f.durable, "durable", summaries.DefaultDurable, "durable consumer feeding it (with --partitions above 1, one of that name on each partition's stream)")
	cmd.Flags().IntVar(&f.partition, "partition", -1, "with --partitions above 1: only this partition's projector (default every partition)")
}

// partitions returns the partitions a projections command works on: the
// one --partition names, or every one.
func (f *projFlags) partitions() ([]int, error) {
	n := max(f.conn.partitions, 1)
	if f.partition >= n {
		return nil, usagef("--partition %d: want 0 to %d (--partitions %d)", f.partition, n-1, n)
	}
	if f.partition >= 0 {
		return []int{f.partition}, nil
	}
	ps := make([]int, n)
	for i := range ps {
		ps[i] = i
	}
	return ps, nil
}

func (a *app) projectionsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "projections",
		Short: "Inspect and rebuild the thread-summaries read model",
		Long: `The thread-summaries read model keeps one JSON summary per thread in a KV
bucket (thread_summaries), fed by a durable JetStream consumer; 'artifactr
serve' runs its projector. Read it with 'artifactr threads', or with any NATS
client: nats kv get thread_summaries THREAD.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(a.stderr)
			_ = cmd.Help()
			return silent(exitUsage, errors.New("projections needs a subcommand"))
		},
	}
	cmd.AddCommand(a.projectionsStatusCommand(), a.projectionsRebuildCommand())
	return cmd
}

func (a *app) projectionsStatusCommand() *cobra.Command {
	var (
		f      projFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the read model's lag behind the stream, its checkpoint and its owner",
		Long: `Show how far the thread-summaries read model is behind the stream: the
stream's last sequence, the checkpoint (every event up to it is applied),
their difference, and the durable consumer's pending counts; and which
projector owns the read model.

--json prints one object:
  {"bucket","stream_last_seq","checkpoint","behind","epoch","durable","durable_exists",
   "num_pending","num_ack_pending","owner","owner_live","updated"}

With --partitions above 1 each partition's stream has its own sequences and
its own projector, checkpoint and consumer: status shows each partition
(--partition N: only that one), and --json prints an array of those objects,
each with "partition", unless --partition names one.

Exit code 1 when the read model does not exist yet.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			parts, err := f.partitions()
			if err != nil {
				return err
			}
			store, err := a.openRead(cmd.Context(), &f.conn)
			if err != nil {
				return err
			}
			defer store.Close()
			var lags []summaries.Lag
			for _, p := range parts {
				l, err := summaries.ReadPartitionLag(cmd.Context(), store, f.bucket, f.durable, p)
				if errors.Is(err, summaries.ErrNoReadModel) {
					return failf("no read model in bucket %s yet: run 'artifactr serve' or 'artifactr projections rebuild'", f.bucket)
				}
				if err != nil {
					return storeError(f.conn.url, err)
				}
				lags = append(lags, l)
			}
			one := len(lags) == 1 && (f.conn.partitions <= 1 || f.partition >= 0)
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				if one {
					return errOrNil(enc.Encode(lags[0]))
				}
				// Each with its partition, 0's too (Lag omits a zero one).
				type partLag struct {
					Partition int `json:"partition"`
					summaries.Lag
				}
				out := make([]partLag, len(lags))
				for i, l := range lags {
					out[i] = partLag{l.Partition, l}
				}
				return errOrNil(enc.Encode(out))
			}
			for _, l := range lags {
				if f.conn.partitions > 1 {
					fmt.Fprintf(a.stdout, "partition %d:\n", l.Partition)
				}
				if err := writeLag(a.stdout, l); err != nil {
					return errOrNil(err)
				}
			}
			return nil
		},
	}
	addProjFlags(cmd, &f)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON object")
	return cmd
}

func writeLag(w io.Writer, l summaries.Lag) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	owner := "none"
	switch {
	case l.Owner != "" && l.OwnerLive:
		owner = l.Owner
	case l.Owner != "":
		owner = l.Owner + " (lapsed)"
	}
	updated := "never"
	if !l.Updated.IsZero() {
		updated = l.Updated.Local().Format(time.RFC3339)
	}
	consumer := "not created"
	if l.DurableExists {
		consumer = fmt.Sprintf("%d pending, %d awaiting ack", l.NumPending, l.NumAckPending)
	}
	fmt.Fprintf(tw, "bucket:\t%s (epoch %d)\n", l.Bucket, l.Epoch)
	fmt.Fprintf(tw, "stream last seq:\t%d\n", l.StreamLastSeq)
	fmt.Fprintf(tw, "checkpoint:\t%d (written %s)\n", l.Checkpoint, updated)
	fmt.Fprintf(tw, "lag:\t%d events\n", l.Behind)
	fmt.Fprintf(tw, "consumer %s:\t%s\n", l.Durable, consumer)
	fmt.Fprintf(tw, "owner:\t%s\n", owner)
	return tw.Flush()
}

func (a *app) projectionsRebuildCommand() *cobra.Command {
	var (
		f      projFlags
		force  bool
		batch  int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "rebuild",
		Short: "Rebuild the read model from the first event of the stream",
		Long: `Rebuild the thread-summaries read model from zero: start a new epoch at
checkpoint 0, delete the durable consumer and the stored summaries, and
replay every event up to the stream's last, with progress on stderr. A
projector that runs afterwards ('artifactr serve') resumes from the new
checkpoint.

While a projector owns the read model (a serve is running) rebuild refuses,
naming it, unless --force: the owner is then fenced out, stands by, and
takes the read model back once the rebuild is done.

With --partitions above 1 each partition has its own projector and
checkpoint: rebuild does each partition in turn (--partition N: only that
one), with a line (or a JSON document) for each.

--json prints one object at the end instead of the summary line:
  {"summaries_bucket","events","writes","checkpoint","seconds","events_per_second"}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if batch < 1 || batch > 50_000 {
				return usagef("--batch %d: want 1 to 50000", batch)
			}
			parts, err := f.partitions()
			if err != nil {
				return err
			}
			store, err := a.openRead(cmd.Context(), &f.conn)
			if err != nil {
				return err
			}
			defer store.Close()
			for _, p := range parts {
				if err := a.rebuildPartition(cmd, store, &f, p, batch, force, asJSON); err != nil {
					return err
				}
			}
			return nil
		},
	}
	addProjFlags(cmd, &f)
	cmd.Flags().BoolVar(&force, "force", false, "take the read model over from a live projector")
	cmd.Flags().IntVar(&batch, "batch", 5000, "events per batch: each writes every summary it touched once")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// rebuildPartition rebuilds partition p's read model and reports it.
func (a *app) rebuildPartition(cmd *cobra.Command, store events.ReadModelStore, f *projFlags, p, batch int, force, asJSON bool) error {
	target, err := store.LastPartitionSeq(cmd.Context(), p)
	if err != nil {
		return storeError(f.conn.url, err)
	}
	rep := &rebuildProgress{w: a.stderr, target: target, start: time.Now()}
	st, err := summaries.Rebuild(cmd.Context(), summaries.Config{
		Store: store, Bucket: f.bucket, Durable: f.durable, Partition: p, Batch: batch, Logger: a.log, Progress: rep.report,
	}, force)
	if errors.Is(err, summaries.ErrOwned) {
		return failf("%v\nhint: stop 'artifactr serve', or pass --force", err)
	}
	if err != nil {
		return storeError(f.conn.url, err)
	}
	el := time.Since(rep.start)
	rate := float64(st.Events) / max(el.Seconds(), 1e-9)
	part := ""
	var jpart *int
	if store.Subjects().Partitioned() {
		part, jpart = fmt.Sprintf(" partition %d", p), &p
	}
	if asJSON {
		return writeJSON(a.stdout, rebuiltJSON{Bucket: f.bucket, Partition: jpart, Events: st.Events, Writes: st.Writes,
			Checkpoint: target, Seconds: el.Seconds(), EventsPerSec: rate})
	}
	fmt.Fprintf(a.stdout, "rebuilt %s%s: %d events in %s (%.0f events/s), %d summary writes, checkpoint %d\n",
		f.bucket, part, st.Events, el.Round(time.Millisecond), rate, st.Writes, target)
	return nil
}

// rebuildProgress prints a line on stderr at most once a second.
type rebuildProgress struct {
	w      io.Writer
	target uint64
	start  time.Time
	last   time.Time
}

func (r *rebuildProgress) report(p summaries.Progress) {
	now := time.Now()
	if now.Sub(r.last) < time.Second && p.Checkpoint < r.target {
		return
	}
	r.last = now
	pct := 100.0
	if r.target > 0 {
		pct = 100 * float64(min(p.Checkpoint, r.target)) / float64(r.target)
	}
	rate := float64(p.Events) / max(now.Sub(r.start).Seconds(), 1e-9)
	fmt.Fprintf(r.w, "rebuild: %d/%d (%.0f%%), %.0f events/s\n", p.Checkpoint, r.target, pct, rate)
}
