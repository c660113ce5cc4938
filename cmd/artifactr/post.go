package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nuid"
	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
)

func (a *app) postCommand() *cobra.Command {
	var (
		conn        connFlags
		id, author  string
		file        string
		strategy    string
		wait        bool
		follow      bool
		waitTimeout time.Duration
		asJSON      bool
	)
	cmd := &cobra.Command{
		Use:   "post THREAD [TEXT | -]",
		Short: "Post a message to a thread, and optionally wait for its run",
		Long: `Post TEXT to THREAD and print the message's stream sequence, followed by
"duplicate" when a message with the same --id was posted before (posting is
idempotent by id; the sequence is then the original one). Reposting an id
with another text or author is a conflict: nothing is written, exit 1.

THREAD, and --id when given, are 1 to 128 characters from [A-Za-z0-9_-]
(ASCII letters, digits, _ and -), such as t1 or support-42.

TEXT "-" reads the text from stdin, and --file PATH from a file, so long
texts work (up to the store's 1 MiB event limit); one trailing newline is
dropped. An empty (or all-blank) text is refused, exit 2: it would still
start a run.

With --wait, follow the thread until the run that took the message ends:
the run whose prompt it is or, when it was consumed as the answer to a
request or as steering, the run it went to. Then print the run's output and
exit 0; a failed run prints its reason and exits 1, an abandoned run (its
runner died and the next holder gave it up) says so and exits 1, and so does
a wait past --wait-timeout. When that run asks a question instead (opens a
request), --wait prints "RUN asks: QUESTION" and exits 0: the run waits for
the thread's next message, which answers it.

The echo agent answers "echo: TEXT"; a TEXT "ask: QUESTION" opens a request
that the thread's next message answers.

With --follow, wait as --wait does, but print the run's outputs as the
agent writes them (a model's tokens as they stream), not only once the run
ended. With --follow --json, print one JSON object per line instead, as
'watch --json' does: the post's message_posted, then the run's events from
the one that took the message (run_started, answer_given or
steering_given) to its end or its next request_opened.

--json prints one object instead, once the post (and with --wait the run)
is done; exit codes are the same:
  {"thread","seq","message_id","duplicate",
   "run":{"run_id","status","output","reason","question","request_id"}|null}
run is null without --wait; its status is "active" when the run asks.`,
		Example: `  artifactr post t1 "hello" --wait
  artifactr post t1 "tell me a story" --follow   # the outputs as they come
  artifactr post t1 "ask: your name?" --wait     # returns once the run asks
  artifactr post t1 "Ada" --wait                 # answers it; prints the run's output
  artifactr post t1 - < long-prompt.txt
  artifactr post t1 --file long-prompt.txt --id prompt-7`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			thread := args[0]
			if err := threadArg(thread); err != nil {
				return err
			}
			if id != "" {
				if err := events.ValidateMessageID(id); err != nil {
					return usagef("--id: %v", err)
				}
			}
			if waitTimeout <= 0 {
				return usagef("--wait-timeout %s: must be positive", waitTimeout)
			}
			if _, err := events.ParseStrategy(strategy); err != nil {
				return usagef("--strategy: %v", err)
			}
			text, err := a.postText(args[1:], file)
			if err != nil {
				return err
			}
			if strings.TrimSpace(text) == "" {
				// It would still start a run: an agent turn, perhaps a
				// paid one, on nothing.
				return usagef("post: the message is empty; nothing posted")
			}
			ctx := cmd.Context()
			cl, err := a.dial(ctx, &conn, false)
			if err != nil {
				return err
			}
			defer cl.Close()
			if id == "" {
				// Chosen here, not by the store, so that a post whose
				// outcome is unknown can be settled by posting it again.
				id = nuid.Next()
			}
			ack, err := a.postTraced(ctx, cl, thread, text, id, author, strategy)
			if err != nil && errors.Is(err, events.ErrUnavailable) {
				// The server may have stored it, or may still (nats.go
				// sends what it buffered while disconnected once it is
				// back): never report it as not written.
				return failf("outcome unknown: the post may have landed, or may still land once NATS at %s is back; "+
					"post it again with --id %s to settle it (a repeat of a stored post is a no-op): %v", conn.url, id, err)
			}
			if err != nil {
				return storeError(conn.url, err)
			}
			if follow {
				if !asJSON {
					printSeq(a.stdout, ack)
				}
				fctx, cancel := context.WithTimeout(ctx, waitTimeout)
				defer cancel()
				return a.runFollow(fctx, cl, conn.url, thread, ack.Seq, waitTimeout, asJSON)
			}
			if asJSON {
				return a.postJSON(ctx, cl, conn.url, ack, wait, waitTimeout)
			}
			printSeq(a.stdout, ack)
			if !wait {
				return nil
			}
			wctx, cancel := context.WithTimeout(ctx, waitTimeout)
			defer cancel()
			return a.waitRun(wctx, cl, conn.url, thread, ack.Seq, waitTimeout)
		},
	}
	addConnFlags(cmd, &conn)
	cmd.Flags().StringVar(&id, "id", "", "message id, [A-Za-z0-9_-]{1,128}; posting the same id and text again is a no-op (default: a fresh id)")
	cmd.Flags().StringVar(&author, "author", "", "author of the message")
	cmd.Flags().StringVar(&file, "file", "", `read the text from this file ("-": stdin) instead of TEXT`)
	cmd.Flags().StringVar(&strategy, "strategy", "", strategyUsage)
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the run that takes the message to end or to ask a question, and print its output or the question")
	cmd.Flags().BoolVar(&follow, "follow", false, "as --wait, but print the run's outputs as they are written; with --json, one event per line")
	cmd.Flags().DurationVar(&waitTimeout, "wait-timeout", 60*time.Second, "how long --wait or --follow waits")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object: the post and, with --wait, its run")
	return cmd
}

// printSeq prints the post's sequence, and "duplicate" for a repost.
func printSeq(w io.Writer, ack client.Posted) {
	if ack.Duplicate {
		fmt.Fprintf(w, "%d duplicate\n", ack.Seq)
	} else {
		fmt.Fprintf(w, "%d\n", ack.Seq)
	}
}

// postText is the text to post: TEXT, or stdin for "-", or --file.
func (a *app) postText(args []string, file string) (string, error) {
	switch {
	case len(args) == 1 && file != "":
		return "", usagef("give the text as TEXT or with --file, not both")
	case len(args) == 0 && file == "":
		return "", usagef(`post needs the text: TEXT, "-" for stdin, or --file PATH`)
	case len(args) == 1 && args[0] != "-":
		return args[0], nil
	case len(args) == 1:
		file = "-"
	}
	r, name := a.stdin, "stdin"
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return "", failf("--file: %v", err)
		}
		defer f.Close()
		r, name = f, file
	}
	// Read at most one byte past the limit: more cannot be posted anyway.
	b, err := io.ReadAll(io.LimitReader(r, events.DefaultMaxEventBytes+1))
	if err != nil {
		return "", failf("read the text from %s: %v", name, err)
	}
	if len(b) > events.DefaultMaxEventBytes {
		return "", failf("the text in %s is over %d bytes, the largest event the store takes", name, events.DefaultMaxEventBytes)
	}
	if !utf8.Valid(b) {
		return "", failf("the text in %s is not valid UTF-8 (a binary file?)", name)
	}
	text := strings.TrimSuffix(string(b), "\n")
	return strings.TrimSuffix(text, "\r"), nil
}

// postJSON prints the post as JSON and, with wait, waits for its run
// first. A run that failed, was abandoned, or was not waited for to its end
// is printed too, and exits 1 as waitRun does.
func (a *app) postJSON(ctx context.Context, cl *client.Client, url string, ack client.Posted, wait bool, limit time.Duration) error {
	out := postedJSON{Thread: ack.Thread, Seq: ack.Seq, MessageID: ack.MessageID, Duplicate: ack.Duplicate}
	if !wait {
		return writeJSON(a.stdout, out)
	}
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	r, err := cl.Wait(wctx, ack.Thread, ack.Seq, client.FollowTakeover())
	if err != nil {
		return waitError(wctx, url, limit, err)
	}
	out.Run = &waitRunJSON{RunID: r.RunID, Status: string(r.Status), Output: r.Output, Reason: r.Reason,
		Question: r.Question, RequestID: r.RequestID}
	if err := writeJSON(a.stdout, out); err != nil {
		return err
	}
	if r.Question != "" {
		return nil
	}
	return runEnd(r)
}

// waitError explains a failed client.Wait.
func waitError(ctx context.Context, url string, limit time.Duration, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return failf("gave up waiting after %s: %v", limit, err)
	case ctx.Err() != nil:
		return fail(ctx.Err())
	}
	return storeError(url, err)
}

// runEnd is the exit of a wait for a run that ended: nil when it
// completed.
func runEnd(r client.Result) error {
	switch r.Status {
	case projections.RunCompleted:
		return nil
	case projections.RunFailed:
		return failf("run %s failed: %s", r.RunID, r.Reason)
	case projections.RunAbandoned:
		return failf("run %s was abandoned (%s): its holder stopped before it ended; the message was consumed and will not be run again", r.RunID, r.Reason)
	}
	return failf("run %s ended as %s", r.RunID, r.Status)
}

// waitRun waits for the run that took message seq (client.Wait, following
// a takeover to the run that took the message) and prints its output, or
// the question it asks.
func (a *app) waitRun(ctx context.Context, cl *client.Client, url, thread string, seq uint64, limit time.Duration) error {
	r, err := cl.Wait(ctx, thread, seq, client.FollowTakeover())
	switch {
	case err != nil:
		return waitError(ctx, url, limit, err)
	case r.Question != "":
		// The run waits for a person: that is the end of this wait, and
		// the next post answers it.
		fmt.Fprintf(a.stdout, "%s asks: %s\n", r.RunID, r.Question)
		fmt.Fprintf(a.stderr, "answer it with: artifactr post %s ANSWER --wait\n", thread)
		return nil
	}
	if r.Status == projections.RunCompleted {
		fmt.Fprintln(a.stdout, r.Output)
	}
	return runEnd(r)
}
