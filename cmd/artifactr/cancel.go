package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events"
)

// strategyUsage documents --strategy, for post and configure.
const strategyUsage = `what the post does while a run is active: enqueue (wait; the default), reject (refuse: exit 1 "thread busy"), interrupt (cancel the run, which fails "interrupted", and run this message next), rollback (interrupt, and leave that run out of later runs' history); default: the thread's`

// configureStrategyUsage documents configure's --strategy, which has no
// default: setting one is what configure does.
const configureStrategyUsage = `the strategy of the thread's posts that name none (required): enqueue (wait), reject (refuse while a run is active), interrupt (cancel the active run and run the post next) or rollback (interrupt, and leave that run out of later runs' history)`

func (a *app) cancelCommand() *cobra.Command {
	var (
		conn   connFlags
		run    string
		id     string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "cancel THREAD",
		Short: "Ask the thread's holder to cancel a run",
		Long: `Record a cancel request (cancel_requested) for the thread's active run, or
for run --run ID, and print its stream sequence. The thread's holder cancels
the run's context; the run ends as run_failed with reason "cancelled". An
agent that honours its context stops at once; an exec agent's program gets
SIGTERM and EOF on stdin, and is killed after a grace period.

A thread with no events (a mistyped id?) or no active run, or a --run that
is not the active one, exits 1 and writes nothing. A request for a run that
ends before the request is stored changes nothing. Requests are idempotent
by --id.

--json prints one object instead: {"thread","seq","run_id","request_id"}.`,
		Example: `  artifactr cancel t1
  artifactr cancel t1 --run run-6-2`,
		Args: cobra.ExactArgs(1),
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
			ctx := cmd.Context()
			cl, err := a.dial(ctx, &conn, false)
			if err != nil {
				return err
			}
			defer cl.Close()
			if err := checkCancel(ctx, cl, thread, run); err != nil {
				return err
			}
			seq, err := cl.Cancel(ctx, thread, run, id)
			if err != nil {
				return storeError(conn.url, err)
			}
			if asJSON {
				return writeJSON(a.stdout, cancelJSON{Thread: thread, Seq: seq, RunID: run, RequestID: id})
			}
			fmt.Fprintf(a.stdout, "%d\n", seq)
			return nil
		},
	}
	addConnFlags(cmd, &conn)
	cmd.Flags().StringVar(&run, "run", "", "the run to cancel (default: the run active when the request is stored)")
	cmd.Flags().StringVar(&id, "id", "", "request id, [A-Za-z0-9_-]{1,128}, for an idempotent retry (default: a fresh id)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func (a *app) configureCommand() *cobra.Command {
	var (
		conn     connFlags
		strategy string
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "configure THREAD --strategy S",
		Short: "Set a thread's double-texting strategy",
		Long: `Record thread_configured: the strategy of THREAD's posts that name none
(post --strategy overrides it per post). Without it, a thread's strategy is
its first post's, or enqueue.

--json prints one object instead: {"thread","seq","strategy"}.`,
		Example: `  artifactr configure t1 --strategy interrupt`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			thread := args[0]
			if err := threadArg(thread); err != nil {
				return err
			}
			st, err := events.ParseStrategy(strategy)
			if err != nil || st == "" {
				return usagef("--strategy %q: want enqueue, reject, interrupt or rollback", strategy)
			}
			ctx := cmd.Context()
			cl, err := a.dial(ctx, &conn, false)
			if err != nil {
				return err
			}
			defer cl.Close()
			seq, err := cl.Configure(ctx, thread, string(st))
			if err != nil {
				return storeError(conn.url, err)
			}
			if asJSON {
				return writeJSON(a.stdout, configuredJSON{Thread: thread, Seq: seq, Strategy: string(st)})
			}
			fmt.Fprintf(a.stdout, "%d\n", seq)
			return nil
		},
	}
	addConnFlags(cmd, &conn)
	cmd.Flags().StringVar(&strategy, "strategy", "", configureStrategyUsage)
	_ = cmd.MarkFlagRequired("strategy")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// checkCancel refuses a cancel that could change nothing: of a thread with
// no events, which would create the thread (the log keeps it forever), or
// with no active run, or of a run that is not the active one.
func checkCancel(ctx context.Context, cl *client.Client, thread, run string) error {
	t, err := cl.Thread(ctx, thread)
	switch {
	case errors.Is(err, client.ErrNoEvents):
		return failf("thread %s has no events, so nothing to cancel; nothing written (see 'artifactr threads' for the threads there are)", thread)
	case err != nil:
		return storeError(cl.URL(), err)
	case t.ActiveRun == nil && run == "":
		return failf("thread %s has no active run, so nothing to cancel; nothing written", thread)
	case t.ActiveRun == nil:
		return failf("run %s is not active in thread %s (no run is), so nothing to cancel; nothing written", run, thread)
	case run != "" && t.ActiveRun.ID != run:
		return failf("run %s is not active in thread %s (%s is), so nothing to cancel; nothing written", run, thread, t.ActiveRun.ID)
	}
	return nil
}
