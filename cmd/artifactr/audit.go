package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/audit"
	"github.com/artifactr/artifactr/spec"
)

func (a *app) auditCommand() *cobra.Command {
	var (
		conn   connFlags
		thread string
		from   uint64
		asJSON bool
		spec   bool
		strand time.Duration
		leases bool
		part   int
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Replay the log and check the protocol's invariants",
		Long: `Replay the stream, all of it or one thread, and check what the fence
promises (projections/audit): each message consumed at most once (I1), at
most one active run per thread (I3), every fenced event carrying the newest
claim, an unbroken claim chain, no run ending after it was abandoned, no
request answered twice, every run event of the active run by the holder
that started it (a run ends once), releases of the newest claim by its
holder, answers and steering given to the active run.

Prints a report, or with --json the report object (see
projections/audit's package doc). On a terminal, a long replay shows its
progress on stderr.

--spec also checks the log against the spec (spec/ThreadClaimLapse.tla, its
Go model): each thread's events, in stream order, must be steps the model
allows; the first event of a thread that is not is reported with its seq
and the actions the spec allowed there. It exits 1 on such an event.

Stranded threads are reported as warnings, not violations: a thread with
a message pending, no active run and no claim (never claimed, or its newest
claim released) for longer than --stranded-after. Runners promise to claim
such a thread within that bound (runner.ConsumeBound: the work queue's
AckWait, three claim TTLs and a claim's retry; 68s for serve's defaults);
one that waits longer is answered by nobody until its next post. 0 turns the
warning off.

--leases lists, instead, the leases in the lease bucket that no live
session explains: a lease naming a session that does not exist, one with no
session and no server-side TTL, one expiring beyond what the lease protocol
writes, or a value that does not decode. No runner writes such a lease; a
writer with runner credentials could, to keep runners off a thread. Runners
take such a thread once the lease is older than the store's
unexplained-lease TTL (1 min), and log and count it
(artifactr_leases_reclaimed_total). It exits 1 when it lists any.

--from SEQ starts the replay at a stream sequence; checks that need earlier
events (which claim is newest, what was consumed) may then report findings
that a full replay would not.

With --partitions above 1 the audit replays every partition's stream in
turn (each thread lives in one, and every check is per thread), or only
--partition N's. Each stream has its own sequences, so --from needs
--partition.

Exit codes, as for every command: 0 no violations (anomalies alone do not
fail an audit), 1 violations found or the audit could not run (NATS
unreachable, no stream, --thread with no events; the message on stderr
says which), 2 usage error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if leases {
				if thread != "" || spec || from > 1 || part >= 0 {
					return usage(fmt.Errorf("--leases takes none of --thread, --spec, --from, --partition"))
				}
				return a.auditLeases(cmd.Context(), &conn, asJSON)
			}
			return a.audit(cmd.Context(), &conn, auditOpts{thread: thread, from: from, asJSON: asJSON, spec: spec, strandedAfter: strand, partition: part})
		},
	}
	addConnFlags(cmd, &conn)
	cmd.Flags().StringVar(&thread, "thread", "", "audit only this thread")
	cmd.Flags().Uint64Var(&from, "from", 1, "first stream sequence to replay")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&spec, "spec", false, "also validate each thread's events against the spec's model")
	cmd.Flags().DurationVar(&strand, "stranded-after", runner.ConsumeBound(defaultClaimTTL, natsstore.WorkAckWait),
		"warn of threads with a message pending, no run and no claim for longer than this (0: off)")
	cmd.Flags().BoolVar(&leases, "leases", false, "list the leases no live session explains, instead of replaying the log")
	cmd.Flags().IntVar(&part, "partition", -1, "with --partitions above 1: audit only this partition's stream (default every partition)")
	return cmd
}

// auditOpts are audit's flags.
type auditOpts struct {
	thread        string
	from          uint64
	asJSON, spec  bool
	strandedAfter time.Duration
	partition     int // -1: every partition
}

func (a *app) audit(ctx context.Context, conn *connFlags, o auditOpts) error {
	thread, from, asJSON, withSpec := o.thread, o.from, o.asJSON, o.spec
	if o.strandedAfter < 0 {
		return usagef("--stranded-after %s: must not be negative", o.strandedAfter)
	}
	aopts := audit.Options{StrandedAfter: o.strandedAfter}
	if thread != "" {
		if err := threadArg(thread); err != nil {
			return err
		}
	}
	from = max(from, 1)
	n := max(conn.partitions, 1)
	switch {
	case o.partition >= n:
		return usagef("--partition %d: want 0 to %d (--partitions %d)", o.partition, n-1, n)
	case o.partition >= 0 && thread != "":
		return usage(fmt.Errorf("--thread audits one thread, in its own partition: drop --partition"))
	case n > 1 && from > 1 && o.partition < 0 && thread == "":
		return usage(fmt.Errorf("--from %d: each partition's stream has its own sequences: name one with --partition", from))
	}
	if withSpec && from > 1 {
		return usage(fmt.Errorf("--spec validates whole threads from their first event: drop --from"))
	}
	store, err := a.openRead(ctx, conn)
	if err != nil {
		return err
	}
	defer store.Close()
	// The stream records its fence layout: a marker off its subject is
	// the violation, a thread's first too.
	aopts.Subjects, aopts.KnownLayout = store.Subjects(), true
	prog := newProgress(a.stderr)
	var sv *spec.TraceValidator
	if withSpec {
		sv = spec.NewTraceValidatorWith(audit.Options{Subjects: store.Subjects(), KnownLayout: true})
		prog.each = sv.Add
	}
	var r audit.Report
	if thread != "" {
		r, err = auditThread(ctx, store, thread, from, aopts, prog)
	} else {
		r, err = auditStream(ctx, store, o.partition, from, aopts, prog)
	}
	prog.done()
	if errors.Is(err, errThreadEmpty) {
		return fail(err)
	}
	if err != nil {
		return storeError(conn.url, err)
	}
	var sr spec.TraceReport
	if sv != nil {
		sr = sv.Report()
	}
	switch {
	case asJSON && sv != nil:
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(struct {
			Audit audit.Report     `json:"audit"`
			Spec  spec.TraceReport `json:"spec"`
		}{r, sr})
	case asJSON:
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(r)
	default:
		err = r.WriteText(a.stdout)
		if err == nil && sv != nil {
			err = writeSpecText(a.stdout, sr)
		}
	}
	if err != nil {
		return fail(err)
	}
	if !r.OK() {
		return silent(exitFail, fmt.Errorf("%d violations", r.ViolationCount))
	}
	if !sr.OK() {
		return silent(exitFail, fmt.Errorf("%d threads do not conform to the spec", len(sr.Nonconforming)))
	}
	return nil
}

// auditLeases lists the leases no live session explains.
func (a *app) auditLeases(ctx context.Context, conn *connFlags, asJSON bool) error {
	store, err := a.openRead(ctx, conn)
	if err != nil {
		return err
	}
	defer store.Close()
	found, err := store.UnexplainedLeases(ctx)
	if err != nil {
		return storeError(conn.url, err)
	}
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		if found == nil {
			found = []natsstore.UnexplainedLease{}
		}
		err = enc.Encode(struct {
			Unexplained []natsstore.UnexplainedLease `json:"unexplained_leases"`
		}{found})
	} else {
		err = writeLeasesText(a.stdout, found)
	}
	if err != nil {
		return fail(err)
	}
	if len(found) > 0 {
		return silent(exitFail, fmt.Errorf("%d leases no live session explains", len(found)))
	}
	return nil
}

func writeLeasesText(w io.Writer, found []natsstore.UnexplainedLease) error {
	if len(found) == 0 {
		_, err := fmt.Fprintln(w, "leases OK: every thread lease lives by a session that explains it")
		return err
	}
	if _, err := fmt.Fprintf(w, "leases: %d no live session explains:\n", len(found)); err != nil {
		return err
	}
	for _, l := range found {
		when := "runners take it at " + l.TakenAt.UTC().Format(time.RFC3339)
		if !l.TakenAt.After(time.Now()) {
			when = "runners take it at their next look (since " + l.TakenAt.UTC().Format(time.RFC3339) + ")"
		}
		if _, err := fmt.Fprintf(w, "  thread %s: holder %q, revision %d, stored %s: %s; %s\n",
			l.Thread, l.Holder, l.Revision, l.Stored.UTC().Format(time.RFC3339), l.Reason, when); err != nil {
			return err
		}
	}
	return nil
}

// writeSpecText prints the trace validation's verdict: one line, then the
// first nonconforming event of each thread that has one. Threads that went
// beyond the model checked in CI are counted first.
func writeSpecText(w io.Writer, sr spec.TraceReport) error {
	if len(sr.Beyond) > 0 {
		if _, err := fmt.Fprintf(w, "spec: %d times a thread went beyond the model checked in CI (spec/ThreadClaimLapse.cfg), validated all the same; the first: thread %s, seq %d: %s\n",
			len(sr.Beyond), sr.Beyond[0].Thread, sr.Beyond[0].Seq, sr.Beyond[0].What); err != nil {
			return err
		}
	}
	if sr.OK() {
		_, err := fmt.Fprintf(w, "spec OK: %d events of %d threads, each a step of ThreadClaimLapse\n", sr.Events, sr.Threads)
		return err
	}
	if _, err := fmt.Fprintf(w, "spec: %d of %d threads do not conform to ThreadClaimLapse:\n", len(sr.Nonconforming), sr.Threads); err != nil {
		return err
	}
	for _, n := range sr.Nonconforming {
		if _, err := fmt.Fprintf(w, "  %s\n", n); err != nil {
			return err
		}
	}
	return nil
}

func auditThread(ctx context.Context, store events.Store, thread string, from uint64, o audit.Options, prog *progress) (audit.Report, error) {
	envs, err := store.Load(ctx, thread, from)
	if err != nil {
		return audit.Report{}, err
	}
	if len(envs) == 0 {
		return audit.Report{}, errNoEvents(thread, from)
	}
	if err := projections.ResolveFirst(ctx, projections.LogOnly(store), envs); err != nil {
		return audit.Report{}, err
	}
	au := audit.NewWithOptions(o)
	prog.total = uint64(len(envs))
	for _, env := range envs {
		au.Add(env)
		prog.tick(env)
	}
	return au.Report(), nil
}

// auditStream replays every event of the store's stream from from up to
// its last sequence when the audit began (natsstore Replay: one ordered
// consumer, decoding ahead of the audit in a goroutine of its own). With
// partitions it replays each partition's stream in turn, or only part's
// (part >= 0): every check is per thread, and a thread lives in one.
func auditStream(ctx context.Context, store *natsstore.Store, part int, from uint64, o audit.Options, prog *progress) (audit.Report, error) {
	subj := store.Subjects()
	o.Subjects = subj
	au := audit.NewWithOptions(o)
	parts := []int{part}
	if part < 0 {
		parts = make([]int, subj.PartitionCount())
		for p := range parts {
			parts[p] = p
		}
	}
	lasts := make([]uint64, len(parts))
	for i, p := range parts {
		last, err := store.LastPartitionSeq(ctx, p)
		if err != nil {
			return audit.Report{}, err
		}
		lasts[i] = last
		if last >= from {
			prog.total += last - from + 1
		}
	}
	logOnly := projections.LogOnly(store) // the audit checks the log, not snapshots
	for i, p := range parts {
		if lasts[i] < from {
			continue
		}
		_, err := store.Replay(ctx, subj.PartitionAll(p), from, func(env events.Envelope) error {
			// A fork by reference is checked against the history it
			// names, read from its source (in its own partition): the one
			// read an audit makes besides the replay, once per fork.
			if err := projections.ResolveFork(ctx, logOnly, &env); err != nil {
				return err
			}
			au.Add(env)
			prog.tick(env)
			return nil
		})
		if err != nil {
			return audit.Report{}, err
		}
	}
	return au.Report(), nil
}

// progress draws a progress bar with events/s on a terminal, at most ten
// times a second. It draws nothing when w is not a terminal.
type progress struct {
	each   func(events.Envelope) // also sees every event, if set (audit --spec)
	w      io.Writer             // nil: not a terminal
	total  uint64
	n      uint64
	start  time.Time
	drawn  time.Time
	active bool
}

func newProgress(w io.Writer) *progress {
	p := &progress{start: time.Now()}
	if isTerminal(w) {
		p.w = w
	}
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (p *progress) tick(env events.Envelope) {
	if p.each != nil {
		p.each(env)
	}
	p.n++
	if p.w == nil || p.n%1024 != 0 {
		return
	}
	now := time.Now()
	// Short replays finish before a bar would help.
	if now.Sub(p.start) < 500*time.Millisecond || now.Sub(p.drawn) < 100*time.Millisecond {
		return
	}
	p.drawn, p.active = now, true
	rate := float64(p.n) / now.Sub(p.start).Seconds()
	const width = 30
	fill := 0
	if p.total > 0 {
		fill = int(min(p.n, p.total) * width / p.total)
	}
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = '.'
		if i < fill {
			bar[i] = '#'
		}
	}
	fmt.Fprintf(p.w, "\r[%s] %d/%d events, %.0f events/s ", bar, p.n, p.total, rate)
}

func (p *progress) done() {
	if p.active {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
