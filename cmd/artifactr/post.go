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
		waitTimeout time.Duration
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
dropped.

With --wait, follow the thread until the run that took the message ends:
the run whose prompt it is or, when it was consumed as the answer to a
request or as steering, the run it went to. Then print the run's output and
exit 0; a failed run prints its reason and exits 1, an abandoned run (its
runner died and the next holder gave it up) says so and exits 1, and so does
a wait past --wait-timeout. When that run asks a question instead (opens a
request), --wait prints "RUN asks: QUESTION" and exits 0: the run waits for
the thread's next message, which answers it.

The echo agent answers "echo: TEXT"; a TEXT "ask: QUESTION" opens a request
that the thread's next message answers.`,
		Example: `  artifactr post t1 "hello" --wait
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
			if ack.Duplicate {
				fmt.Fprintf(a.stdout, "%d duplicate\n", ack.Seq)
			} else {
				fmt.Fprintf(a.stdout, "%d\n", ack.Seq)
			}
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
	cmd.Flags().DurationVar(&waitTimeout, "wait-timeout", 60*time.Second, "how long --wait waits")
	return cmd
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

// waitRun waits for the run that took message seq (client.Wait, following
// a takeover to the run that took the message) and prints its output, or
// the question it asks.
func (a *app) waitRun(ctx context.Context, cl *client.Client, url, thread string, seq uint64, limit time.Duration) error {
	r, err := cl.Wait(ctx, thread, seq, client.FollowTakeover())
	switch {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return failf("gave up waiting after %s: %v", limit, err)
	case err != nil && ctx.Err() != nil:
		return fail(ctx.Err())
	case err != nil:
		return storeError(url, err)
	case r.Question != "":
		// The run waits for a person: that is the end of this wait, and
		// the next post answers it.
		fmt.Fprintf(a.stdout, "%s asks: %s\n", r.RunID, r.Question)
		fmt.Fprintf(a.stderr, "answer it with: artifactr post %s ANSWER --wait\n", thread)
		return nil
	}
	switch r.Status {
	case projections.RunCompleted:
		fmt.Fprintln(a.stdout, r.Output)
		return nil
	case projections.RunFailed:
		return failf("run %s failed: %s", r.RunID, r.Reason)
	case projections.RunAbandoned:
		return failf("run %s was abandoned (%s): its holder stopped before it ended; the message was consumed and will not be run again", r.RunID, r.Reason)
	}
	return failf("run %s ended as %s", r.RunID, r.Status)
}
