package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/client"
)

func (a *app) forkCommand() *cobra.Command {
	var (
		conn   connFlags
		at     string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "fork THREAD --at SEQ NEW",
		Short: "Start thread NEW with THREAD's history up to one of its events",
		Long: `Create thread NEW whose history is THREAD's up to SEQ, the stream sequence of
one of THREAD's events (see 'artifactr show THREAD' or 'watch THREAD --from
all'), and print the sequence of NEW's first event, thread_forked, which
names THREAD and SEQ: the history is not copied, it is read from THREAD's
log up to SEQ (so a thread of any length can be forked, and a fork too).

In NEW, every message of that history is history: consumed, never a prompt, even one
still pending in THREAD at SEQ (THREAD may yet answer it; post it again to
NEW to have it answered there). A run active in THREAD at SEQ is ended in
NEW, with its outputs so far. So NEW starts idle; its runs see those
messages in their history. THREAD is unchanged.

The fork is refused, writing nothing, when NEW already has events (exit 1,
"already has events") or when SEQ is not an event of THREAD (exit 1).
Forking again the same THREAD at the same SEQ into NEW is a no-op and prints
the first fork's sequence followed by "duplicate".

Forking needs only the client role's permissions, as posting does.

--json prints one object instead:
  {"thread","source","source_seq","seq","messages","runs","duplicate"}`,
		Example: `  artifactr fork t1 --at 12 t1-retry
  artifactr show t1-retry`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			source, into := args[0], args[1]
			for _, id := range args {
				if err := threadArg(id); err != nil {
					return err
				}
			}
			if source == into {
				return usagef("fork %s into itself: name a new thread", source)
			}
			seq, err := strconv.ParseUint(at, 10, 64)
			if err != nil || seq == 0 {
				return usagef("--at %q: want the stream sequence of one of %s's events", at, source)
			}
			ctx := cmd.Context()
			cl, err := a.dial(ctx, &conn, false)
			if err != nil {
				return err
			}
			defer cl.Close()
			f, err := cl.Fork(ctx, source, seq, into)
			switch {
			case errors.Is(err, client.ErrNoSuchEvent):
				// The sentinel's words add nothing to the sequences named.
				return failf("fork: %s", strings.TrimPrefix(err.Error(), client.ErrNoSuchEvent.Error()+": "))
			case errors.Is(err, client.ErrThreadExists), errors.Is(err, client.ErrNoEvents):
				return fail(err)
			case err != nil:
				return storeError(conn.url, err)
			}
			if asJSON {
				return writeJSON(a.stdout, forkedJSON{Thread: into, Source: source, SourceSeq: seq, Seq: f.Seq,
					Messages: f.Messages, Runs: f.Runs, Duplicate: f.Duplicate})
			}
			if f.Duplicate {
				fmt.Fprintf(a.stdout, "%d duplicate\n", f.Seq)
			} else {
				fmt.Fprintf(a.stdout, "%d\n", f.Seq)
			}
			fmt.Fprintf(a.stderr, "%s forked from %s at %d: %s and %s of history, by reference\n",
				into, source, seq, plural(f.Messages, "message"), plural(f.Runs, "run"))
			return nil
		},
	}
	addConnFlags(cmd, &conn)
	cmd.Flags().StringVar(&at, "at", "", "stream sequence of the event of THREAD the history stops at (required)")
	_ = cmd.MarkFlagRequired("at")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}
