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

	"github.com/spf13/cobra"

	"artifactr/events"
	"artifactr/events/eventspb"
	"artifactr/internal/doubletext"
	"artifactr/projections"
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
			store, err := a.open(ctx, &conn, 0)
			if err != nil {
				return err
			}
			defer store.Close()
			m := &eventspb.MessagePosted{MessageId: id, Author: author, Text: text, Strategy: strategy}
			ack, err := a.postTraced(ctx, doubletext.Poster{Store: store}, thread, m)
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
			return a.waitRun(wctx, store, conn.url, thread, ack.Seq, waitTimeout)
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

// runOutcome is what became of a posted message, as far as the log shows.
type runOutcome struct {
	run     *projections.Run // nil while the message is pending
	how     projections.ConsumptionKind
	pending bool
}

// outcomeOf finds the run that took message seq in t.
func outcomeOf(t *projections.Thread, seq uint64) runOutcome {
	for i := range t.Messages {
		m := &t.Messages[i]
		if m.Seq != seq {
			continue
		}
		if m.Consumed == nil {
			return runOutcome{pending: true}
		}
		o := runOutcome{how: m.Consumed.Kind}
		for j := len(t.Runs) - 1; j >= 0; j-- {
			if t.Runs[j].ID == m.Consumed.RunID {
				o.run = t.Runs[j]
				break
			}
		}
		return o
	}
	return runOutcome{pending: true} // not folded yet
}

// waitRun follows thread until the run that took message seq ends, then
// prints its output, or until that run opens a request, then prints the
// question.
func (a *app) waitRun(ctx context.Context, store events.Store, url, thread string, seq uint64, limit time.Duration) error {
	tail, err := store.Tail(ctx, events.Subjects{}.ThreadAll(thread), 1)
	if err != nil {
		return storeError(url, err)
	}
	defer tail.Stop()
	t := projections.New(thread)
	for {
		env, err := tail.Next(ctx)
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return failf("gave up waiting after %s: %s", limit, describeWait(outcomeOf(t, seq), seq))
			}
			if ctx.Err() != nil {
				return fail(ctx.Err())
			}
			return storeError(url, err)
		}
		t.Apply(env)
		if env.Seq < seq {
			continue
		}
		o := outcomeOf(t, seq)
		if o.run == nil {
			continue
		}
		if o.run.Status == projections.RunActive {
			if open := t.OpenRequests(); len(open) > 0 {
				// The run waits for a person: that is the end of this
				// wait, and the next post answers it.
				fmt.Fprintf(a.stdout, "%s asks: %s\n", o.run.ID, open[0].Question)
				fmt.Fprintf(a.stderr, "answer it with: artifactr post %s ANSWER --wait\n", thread)
				return nil
			}
			continue
		}
		return a.printOutcome(o)
	}
}

func describeWait(o runOutcome, seq uint64) string {
	switch {
	case o.pending:
		return fmt.Sprintf("message %d is still pending (is a runner serving this stream?)", seq)
	case o.run == nil:
		return fmt.Sprintf("message %d was consumed as %s by a run not in the log", seq, o.how)
	}
	return fmt.Sprintf("message %d went to run %s as its %s, which is still active", seq, o.run.ID, o.how)
}

// printOutcome prints an ended run's output, or why it did not complete.
func (a *app) printOutcome(o runOutcome) error {
	r := o.run
	switch r.Status {
	case projections.RunCompleted:
		out := r.Output
		if out == "" {
			out = strings.Join(r.Outputs, "\n")
		}
		fmt.Fprintln(a.stdout, out)
		return nil
	case projections.RunFailed:
		return failf("run %s failed: %s", r.ID, r.Reason)
	case projections.RunAbandoned:
		return failf("run %s was abandoned (%s): its holder %s stopped before it ended; the message was consumed and will not be run again", r.ID, r.Reason, r.Holder)
	}
	return failf("run %s ended as %s", r.ID, r.Status)
}
