package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
)

func (a *app) showCommand() *cobra.Command {
	var (
		conn   connFlags
		asJSON bool
		at     string
		last   int
		all    bool
	)
	cmd := &cobra.Command{
		Use:   "show THREAD",
		Short: "Show a thread's state: claim, runs, messages, requests, anomalies",
		Long: `Replay THREAD's events and show its state: the newest claim, the active run,
each message (the newest 50 by default, see --last) and how it was
consumed (prompt, answer or steering, by which run), each run with its
status and outputs, the open requests, and any anomalies the fold found.

--at SEQ replays only the events with stream sequence <= SEQ; --at TIME (RFC
3339, such as 2026-01-02T15:04:05Z) only those stored at or before TIME. So
you can see the thread as it was. A SEQ of 0 or past the stream's last, a
TIME to come, or a point before the thread's first event exits 1.

--json prints the state as one object:
  {"thread","last_seq","last_activity","taken",
   "claim":{"holder","seq","lease_revision","released"},
   "active_run":"RUN_ID"|null,
   "messages":[{"seq","message_id","author","text","posted",
                "consumed":{"kind","run_id","seq"}|null}],
   "runs":[{"id","status","prompt_seq","start_seq","end_seq","claim_seq",
            "holder","agent","outputs","output","reason","steering","requests"}],
   "open_requests":[{"id","run_id","question","opened_seq"}],
   "anomalies":[{"seq","type","reason"}],
   "fork":{"source","source_seq","seq"}|null}

A thread started by 'artifactr fork' shows where it was forked from; the
messages and runs of its history, read from its source up to the fork's
source seq, are history (consumed "forked"; runs with start_seq 0, ended
at the fork's seq).

By default show prints the thread's state (claim, active run, open
requests, pending messages, counts) and only its newest --last N messages
(default 50), with the runs started since the oldest of them and their
outputs. It says how many older messages it left out, and how many
messages are pending, shown or not; --all prints every message and run.
--json then has "omitted_messages" (how many), "omitted_before_seq" (the
oldest message shown: runs started before it are left out too) and
"pending" (every pending message's seq), absent when nothing is left out.

show starts from the thread's snapshot (KV bucket thread_snapshots) when
one verifies and is not past --at SEQ, and reads only the events after it
and those from the oldest message it prints on: what it reads is bounded
by what it prints, not by the thread's length (a run that started before
those messages is read from its start). The anomalies are then
those the snapshot kept (its newest 16) and those after it. Without a
usable snapshot, with --at TIME, for a --last past the 256 newest
messages a runner's snapshot remembers, or for a window that reaches
into a fork's history, it folds the whole thread and prints the same. --all folds
the whole thread (a runner's compact snapshot holds no consumed messages,
so it is read from the start).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			thread := args[0]
			if err := threadArg(thread); err != nil {
				return err
			}
			opt, err := atOption(at)
			if err != nil {
				return err
			}
			cl, err := a.dial(cmd.Context(), &conn, true)
			if err != nil {
				return err
			}
			defer cl.Close()
			if err := checkAt(cmd.Context(), cl, thread, at); err != nil {
				return err
			}
			var om omission
			var t *projections.Thread
			if all {
				t, err = cl.Thread(cmd.Context(), thread, opt)
			} else {
				var w *client.Window
				if w, err = cl.ThreadLast(cmd.Context(), thread, last, opt); err == nil {
					t, om = w.Thread, omission{messages: w.OmittedMessages, numMessages: w.NumMessages, before: w.From, pending: w.PendingSeqs}
				}
			}
			switch {
			case errors.Is(err, client.ErrNoEvents):
				return fail(errNoEvents(thread, 1))
			case err != nil:
				return storeError(conn.url, err)
			}
			if t.LastSeq == 0 {
				// The thread exists, but not yet at --at: as for a thread
				// with no events at all, there is nothing to show.
				return failf("thread %s has no events at or before %s (see 'artifactr show %s' for its events)", thread, at, thread)
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				v := showView(t)
				if om.messages > 0 {
					v.OmittedMessages, v.OmittedBefore = om.messages, om.before
					v.Pending = nonNil(om.pending)
				}
				return errOrNil(enc.Encode(v))
			}
			return errOrNil(writeShowOmitting(a.stdout, t, om))
		},
	}
	addConnFlags(cmd, &conn)
	cmd.Flags().IntVar(&last, "last", defaultShowLast, "print only the newest N messages and the runs since (see --all)")
	cmd.Flags().BoolVar(&all, "all", false, "print every message and run (folds the whole thread)")
	cmd.MarkFlagsMutuallyExclusive("last", "all")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if last < 1 {
			return usagef("--last %d: want at least 1 (or --all)", last)
		}
		return nil
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the state as JSON")
	cmd.Flags().StringVar(&at, "at", "", "replay only events up to this stream sequence or RFC 3339 time")
	return cmd
}

// defaultShowLast is show's --last: a screenful or two of messages, well
// inside the newest projections.RecentWindow (256) that a runner's compact
// snapshot remembers, so that the window is found without a search.
const defaultShowLast = 50

// omission is what a bounded show leaves out: messages older messages,
// of numMessages, before the message at seq before, and the runs started
// before it; pending are the pending messages, which it counts whether it
// shows them or not. The zero value leaves out nothing.
type omission struct {
	messages, numMessages int
	before                uint64
	pending               []uint64 // every pending message, shown or not
}

// errThreadEmpty is a thread id with no events: most often a typo.
var errThreadEmpty = errors.New("no events")

func errNoEvents(thread string, from uint64) error {
	if from > 1 {
		return fmt.Errorf("thread %s has %w from seq %d (see 'artifactr threads' for the threads there are)", thread, errThreadEmpty, from)
	}
	return fmt.Errorf("thread %s has %w (see 'artifactr threads' for the threads there are)", thread, errThreadEmpty)
}

// checkAt refuses an --at outside the stream: a sequence of 0 or past its
// last, or a time still to come. Such a point is most likely a typo, and
// showing the latest state for it would hide that.
func checkAt(ctx context.Context, cl *client.Client, thread, at string) error {
	if at == "" {
		return nil
	}
	n, err := strconv.ParseUint(at, 10, 64)
	if err != nil {
		if t, err := time.Parse(time.RFC3339Nano, at); err == nil && t.After(time.Now()) {
			return failf("--at %s is in the future", at)
		}
		return nil
	}
	if n == 0 {
		return failf("--at 0: stream sequences start at 1")
	}
	lasts, err := cl.LastSeqs(ctx)
	if err != nil {
		return storeError(cl.URL(), err)
	}
	// With partitions, the sequences of thread's partition's stream.
	if last := lasts[cl.Subjects().PartitionOf(thread)]; n > last {
		return failf("--at %d is past the stream's last sequence, %d", n, last)
	}
	return nil
}

func errOrNil(err error) error {
	if err != nil {
		return fail(err)
	}
	return nil
}

// parseAt parses --at into a filter on envelopes.
// atOption is --at as the option of client.Thread: by sequence, show
// starts from the thread's snapshot when it is not past SEQ and reads only
// the events after it.
func atOption(at string) (client.ThreadOption, error) {
	if n, err := strconv.ParseUint(at, 10, 64); err == nil {
		return client.AtSeq(n), nil
	}
	if at == "" {
		return client.AtSeq(0), nil // the whole thread
	}
	keep, err := parseAt(at)
	if err != nil {
		return nil, err
	}
	return client.Filter(keep), nil
}

func parseAt(at string) (func(events.Envelope) bool, error) {
	if at == "" {
		return func(events.Envelope) bool { return true }, nil
	}
	if n, err := strconv.ParseUint(at, 10, 64); err == nil {
		return func(e events.Envelope) bool { return e.Seq <= n }, nil
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return nil, usagef("--at %q: want a stream sequence or an RFC 3339 time such as 2026-01-02T15:04:05Z", at)
	}
	return func(e events.Envelope) bool { return !e.Stored.After(t) }, nil
}

// Views of a projections.Thread for --json, with stable snake_case names.
type (
	threadView struct {
		Thread       string        `json:"thread"`
		LastSeq      uint64        `json:"last_seq"`
		LastActivity *time.Time    `json:"last_activity"`
		Taken        uint64        `json:"taken"`
		Claim        *claimView    `json:"claim"`
		ActiveRun    *string       `json:"active_run"`
		Messages     []messageView `json:"messages"`
		Runs         []runView     `json:"runs"`
		OpenRequests []requestView `json:"open_requests"`
		Anomalies    []anomalyView `json:"anomalies"`
		Fork         *forkView     `json:"fork"`
		Strategy     string        `json:"strategy,omitempty"` // show_strategy.go
		// Set only when show leaves older messages out (--last).
		OmittedMessages int      `json:"omitted_messages,omitempty"`
		OmittedBefore   uint64   `json:"omitted_before_seq,omitempty"`
		Pending         []uint64 `json:"pending,omitempty"` // with omitted_messages: every pending message's seq
	}
	forkView struct {
		Source    string `json:"source"`
		SourceSeq uint64 `json:"source_seq"`
		Seq       uint64 `json:"seq"`
	}
	claimView struct {
		Holder        string `json:"holder"`
		Seq           uint64 `json:"seq"`
		LeaseRevision uint64 `json:"lease_revision"`
		Released      bool   `json:"released"`
	}
	messageView struct {
		Seq       uint64           `json:"seq"`
		MessageID string           `json:"message_id"`
		Author    string           `json:"author"`
		Text      string           `json:"text"`
		Posted    time.Time        `json:"posted"`
		Consumed  *consumptionView `json:"consumed"`
		Strategy  string           `json:"strategy,omitempty"`
	}
	consumptionView struct {
		Kind  string `json:"kind"`
		RunID string `json:"run_id"`
		Seq   uint64 `json:"seq"`
	}
	runView struct {
		ID        string   `json:"id"`
		Status    string   `json:"status"`
		PromptSeq uint64   `json:"prompt_seq"`
		StartSeq  uint64   `json:"start_seq"`
		EndSeq    uint64   `json:"end_seq"`
		ClaimSeq  uint64   `json:"claim_seq"`
		Holder    string   `json:"holder"`
		Agent     string   `json:"agent"`
		Outputs   []string `json:"outputs"`
		Output    string   `json:"output"`
		Reply     string   `json:"reply"` // projections.Run.Reply: the one rule for outputs and output
		Reason    string   `json:"reason"`
		Steering  []uint64 `json:"steering"`
		Requests  []string `json:"requests"`

		CancelSeq     uint64 `json:"cancel_seq,omitempty"`
		InterruptSeq  uint64 `json:"interrupt_seq,omitempty"`
		InterruptedBy uint64 `json:"interrupted_by,omitempty"`
		RolledBack    bool   `json:"rolled_back,omitempty"`
	}
	requestView struct {
		ID        string `json:"id"`
		RunID     string `json:"run_id"`
		Question  string `json:"question"`
		OpenedSeq uint64 `json:"opened_seq"`
	}
	anomalyView struct {
		Seq    uint64 `json:"seq"`
		Type   string `json:"type"`
		Reason string `json:"reason"`
	}
)

func showView(t *projections.Thread) threadView {
	v := threadView{
		Thread: t.ID, LastSeq: t.LastSeq, Taken: t.Taken,
		Messages: []messageView{}, Runs: []runView{}, OpenRequests: []requestView{}, Anomalies: []anomalyView{},
	}
	if !t.LastActivity.IsZero() {
		la := t.LastActivity.UTC()
		v.LastActivity = &la
	}
	if t.Claim.Seq != 0 {
		v.Claim = &claimView{Holder: t.Claim.Holder, Seq: t.Claim.Seq, LeaseRevision: t.Claim.LeaseRevision, Released: t.Claim.Released}
	}
	if t.ActiveRun != nil {
		id := t.ActiveRun.ID
		v.ActiveRun = &id
	}
	if f := t.Fork; f != nil {
		v.Fork = &forkView{Source: f.Source, SourceSeq: f.SourceSeq, Seq: f.Seq}
	}
	for _, m := range t.Messages {
		mv := messageView{Seq: m.Seq, MessageID: m.MessageID, Author: m.Author, Text: m.Text, Posted: m.Posted.UTC()}
		if c := m.Consumed; c != nil {
			mv.Consumed = &consumptionView{Kind: string(c.Kind), RunID: c.RunID, Seq: c.Seq}
		}
		v.Messages = append(v.Messages, mv)
	}
	for _, r := range t.Runs {
		v.Runs = append(v.Runs, runView{
			ID: r.ID, Status: string(r.Status), PromptSeq: r.PromptSeq, StartSeq: r.StartSeq, EndSeq: r.EndSeq,
			ClaimSeq: r.ClaimSeq, Holder: r.Holder, Agent: r.Agent, Outputs: nonNil(r.Outputs), Output: r.Output, Reply: r.Reply(),
			Reason: r.Reason, Steering: nonNil(r.Steering), Requests: nonNil(r.Requests),
		})
	}
	for _, q := range t.OpenRequests() {
		v.OpenRequests = append(v.OpenRequests, requestView{ID: q.ID, RunID: q.RunID, Question: q.Question, OpenedSeq: q.OpenedSeq})
	}
	for _, an := range t.Anomalies {
		v.Anomalies = append(v.Anomalies, anomalyView{Seq: an.Seq, Type: string(an.Type), Reason: an.Reason})
	}
	showStrategy(&v, t)
	return v
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// writeShow prints t for a person.
func writeShow(w io.Writer, t *projections.Thread) error { return writeShowOmitting(w, t, omission{}) }

// writeShowOmitting prints t, which leaves out what om says, for a person.
func writeShowOmitting(w io.Writer, t *projections.Thread, om omission) error {
	var b strings.Builder
	if om.messages == 0 {
		fmt.Fprintf(&b, "thread %s: %s, %s, last seq %d, last activity %s\n",
			t.ID, plural(len(t.Messages), "message"), plural(len(t.Runs), "run"), t.LastSeq, t.LastActivity.Local().Format(time.RFC3339))
	} else {
		fmt.Fprintf(&b, "thread %s: %s, last seq %d, last activity %s\n",
			t.ID, plural(om.numMessages, "message"), t.LastSeq, t.LastActivity.Local().Format(time.RFC3339))
		fmt.Fprintf(&b, "omitted:    %s before seq %d and the runs started before it; the newest %s and %s follow ('artifactr show %s --all' prints them all)\n",
			plural(om.messages, "older message"), om.before, plural(len(t.Messages), "message"), plural(len(t.Runs), "run"), t.ID)
		if p := om.pending; len(p) > 0 {
			fmt.Fprintf(&b, "pending:    %s, the oldest at seq %d\n", plural(len(p), "message"), p[0])
		} else {
			b.WriteString("pending:    none\n")
		}
	}
	if f := t.Fork; f != nil {
		fmt.Fprintf(&b, "forked:     from %s at %d (thread_forked at %d); messages up to it are history\n", f.Source, f.SourceSeq, f.Seq)
		if f.Unresolved {
			fmt.Fprintf(&b, "            (its history, %s's events up to %d, was not read)\n", f.Source, f.SourceSeq)
		}
	}
	switch c := t.Claim; {
	case c.Seq == 0:
		b.WriteString("claim:      none\n")
	case c.Released:
		fmt.Fprintf(&b, "claim:      seq %d by %s (released)\n", c.Seq, c.Holder)
	default:
		fmt.Fprintf(&b, "claim:      seq %d by %s (lease revision %d)\n", c.Seq, c.Holder, c.LeaseRevision)
	}
	if t.Strategy != "" {
		fmt.Fprintf(&b, "strategy:   %s\n", t.Strategy)
	}
	if r := t.ActiveRun; r != nil {
		fmt.Fprintf(&b, "active run: %s (prompt %d, claim %d, holder %s)\n", r.ID, r.PromptSeq, r.ClaimSeq, r.Holder)
	} else {
		b.WriteString("active run: none\n")
	}
	b.WriteString("messages:\n")
	for _, m := range t.Messages {
		how := "pending"
		switch c := m.Consumed; {
		case c != nil && c.Kind == projections.ConsumedForked:
			how = "history, copied by the fork at " + u(c.Seq)
		case c != nil:
			how = fmt.Sprintf("%s of %s (at %d)", c.Kind, c.RunID, c.Seq)
		}
		who := ""
		if m.Author != "" {
			who = " by " + m.Author
		}
		fmt.Fprintf(&b, "  %4d %s%s: %s  -> %s\n", m.Seq, m.MessageID, who, quote(m.Text), how)
	}
	writeRuns(&b, t)
	if open := t.OpenRequests(); len(open) > 0 {
		b.WriteString("open requests:\n")
		for _, q := range open {
			fmt.Fprintf(&b, "  %s of %s: %s (opened at %d)\n", q.ID, q.RunID, quote(q.Question), q.OpenedSeq)
		}
	}
	if len(t.Anomalies) > 0 {
		b.WriteString("anomalies:\n")
		for _, an := range t.Anomalies {
			fmt.Fprintf(&b, "  seq %d (%s): %s\n", an.Seq, orDash(string(an.Type)), an.Reason)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeRuns writes t's runs with their outputs, requests and ends.
func writeRuns(b *strings.Builder, t *projections.Thread) {
	if len(t.Runs) > 0 {
		b.WriteString("runs:\n")
	}
	for _, r := range t.Runs {
		span := fmt.Sprintf("%d..%d", r.StartSeq, r.EndSeq)
		switch {
		case r.EndSeq == 0:
			span = fmt.Sprintf("%d..", r.StartSeq)
		case r.StartSeq == 0 && t.Fork != nil:
			span = "copied by the fork at " + u(r.EndSeq)
		}
		fmt.Fprintf(b, "  %s %s: prompt %d, claim %d, holder %s, seqs %s\n", r.ID, r.Status, r.PromptSeq, r.ClaimSeq, r.Holder, span)
		for _, o := range r.Outputs {
			fmt.Fprintf(b, "      output:  %s\n", quote(o))
		}
		for _, id := range r.Requests {
			if q := t.Requests[id]; q != nil {
				ans := "unanswered"
				if q.Answered {
					ans = fmt.Sprintf("answered by message %d", q.MessageSeq)
				}
				fmt.Fprintf(b, "      request: %s %s, %s\n", id, quote(q.Question), ans)
			}
		}
		if len(r.Steering) > 0 {
			fmt.Fprintf(b, "      steering: messages %v\n", r.Steering)
		}
		writeRunStrategy(b, r) // show_strategy.go
		switch r.Status {
		case projections.RunCompleted:
			fmt.Fprintf(b, "      result:  %s\n", quote(r.Reply())) // the reply, by projections.Run.Reply
		case projections.RunFailed, projections.RunAbandoned:
			fmt.Fprintf(b, "      reason:  %s\n", quote(r.Reason))
		}
	}
}

// plural formats n things.
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
