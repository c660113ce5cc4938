package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/events"
)

func (a *app) watchCommand() *cobra.Command {
	var (
		conn   connFlags
		asJSON bool
		from   string
	)
	cmd := &cobra.Command{
		Use:   "watch [THREAD]",
		Short: "Follow events live, of every thread or of one",
		Long: `Follow the stream's events as they are written, of every thread or of
THREAD, until interrupted.

Each line is: stored time, sequence, thread, type, then the event's key
fields, for example:

  15:04:05.123 12 t1 run_started run=run-5-7 prompt=5 claim=7 holder=r1/ab12 agent=echo

--json prints one JSON object per line per event instead:
  {"seq","subject","thread","type","time","event_time","claim_seq","holder",
   "msg_id","body","error"}
where time is the server's stored time, event_time the writer's clock, and
body the event's protobuf body in canonical JSON (proto field names, 64-bit
integers as strings); error is set, and body null, for a malformed event.

--from picks the first event: "new" (default, only events written from now
on), "all" (from the start of the stream), or a stream sequence.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			start, err := parseFrom(from)
			if err != nil {
				return err
			}
			thread := ""
			if len(args) == 1 {
				if err := threadArg(args[0]); err != nil {
					return err
				}
				thread = args[0]
			}
			cl, err := a.dial(cmd.Context(), &conn, true)
			if err != nil {
				return err
			}
			defer cl.Close()
			// Interrupting is the normal way to stop watching: exit 0.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return watch(ctx, cl.Watch(ctx, thread, start), a.stdout, asJSON, conn.url)
		},
	}
	addConnFlags(cmd, &conn)
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line per event")
	cmd.Flags().StringVar(&from, "from", "new", `first event: "new", "all" or a stream sequence`)
	return cmd
}

// parseFrom parses --from into a Tail start: 0 means only new events.
func parseFrom(s string) (uint64, error) {
	switch s {
	case "new", "":
		return 0, nil
	case "all":
		return 1, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, usagef(`--from %q: want "new", "all" or a sequence of at least 1`, s)
	}
	return n, nil
}

// watch prints the events of seq until ctx ends.
func watch(ctx context.Context, seq iter.Seq2[events.Envelope, error], w io.Writer, asJSON bool, url string) error {
	enc := json.NewEncoder(w)
	for env, err := range seq {
		if err != nil {
			if errors.Is(err, events.ErrClosed) {
				return failf("watch ended: %v", err)
			}
			return storeError(url, err)
		}
		if asJSON {
			err = enc.Encode(toJSON(env))
		} else {
			_, err = fmt.Fprintln(w, formatEvent(env))
		}
		if err != nil {
			return fail(err)
		}
	}
	// The sequence ends quietly only when ctx ends: interrupted, the normal
	// way to stop watching.
	return nil
}
