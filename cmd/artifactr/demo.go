package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/audit"
)

// demoBudget bounds the whole demo, so that a fault makes it fail rather
// than hang.
const demoBudget = 50 * time.Second

func (a *app) demoCommand() *cobra.Command {
	var (
		ttl    time.Duration
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "A guided tour: runs, a request answered, and a claim lapse refused by the fence",
		Long: `Run a self-contained tour, with no setup: an embedded NATS server in a temporary
directory on a free loopback port, and a runner with the echo agent.

It posts to two threads, including an "ask:" prompt answered by a later
post, and shows every event live. Then it stages a claim lapse step by step:
holder A claims a thread and plans a run, stalls past its lease; holder B
takes the lapsed lease and starts the run; A wakes and sends its run_started,
which the fence refuses, writing nothing. It ends with the thread's state and
an audit of the whole log, which must be clean.

The data is thrown away at the end (and is not fsynced: nothing of it has to
survive). Exit 0 when every step went as told.

--json prints the tour on stderr and one object on stdout at the end:
{"ok"} and, when a step did not go as told, {"ok":false,"error"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ttl < 200*time.Millisecond || ttl > 10*time.Second {
				return usagef("--claim-ttl %s: want 200ms to 10s", ttl)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), demoBudget)
			defer cancel()
			var jsonOut io.Writer
			if asJSON {
				jsonOut = a.jsonMode()
			}
			err := a.demo(ctx, ttl)
			if asJSON {
				v := demoJSON{OK: err == nil}
				if err != nil {
					v.Error = err.Error()
				}
				if jerr := writeJSON(jsonOut, v); jerr != nil {
					return jerr
				}
			}
			if err != nil {
				return fail(fmt.Errorf("demo: %w", err))
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&ttl, "claim-ttl", 2*time.Second, "lease TTL of the demo's claims; the lapse takes this long")
	cmd.Flags().BoolVar(&asJSON, "json", false, "tell the tour on stderr; print one JSON object, the outcome, on stdout")
	return cmd
}

// demo runs the tour.
func (a *app) demo(ctx context.Context, ttl time.Duration) error {
	quiet := a.serverLogger()
	// The tour says itself that its data is not fsynced.
	ts, err := a.startTempServer(ctx, "artifactr-demo-", true, quiet)
	if err != nil {
		return err
	}
	defer ts.Close()
	srv, store, dir := ts.srv, ts.store, ts.dir

	p := newLivePrinter(a.stdout, "    | ")
	p.say("== artifactr demo: embedded NATS at %s, data in %s (thrown away)", srv.ClientURL(), dir)
	p.say("   Every event is shown live as: time, seq, thread, type, fields.")
	tail, err := store.Tail(ctx, events.Subjects{}.All(), 1)
	if err != nil {
		return err
	}
	fctx, stopFollow := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer tail.Stop()
		p.follow(fctx, tail)
	}()
	defer func() { stopFollow(); <-done }()

	if err := demoRuns(ctx, p, store, ttl, quiet); err != nil {
		return err
	}
	if err := demoLapse(ctx, p, store, srv.ClientURL(), ttl, quiet); err != nil {
		return err
	}
	return demoSummary(ctx, p, store)
}

// demoRuns shows a runner with the echo agent at work, then stops it
// gracefully.
func demoRuns(ctx context.Context, p *livePrinter, store *natsstore.Store, ttl time.Duration, log *slog.Logger) error {
	r, err := runner.New(runner.Config{
		Store: store, Agent: agent.Echo{}, ID: "runner-1", ClaimTTL: ttl,
		IdleTimeout: time.Minute, ShutdownGrace: 2 * time.Second, Logger: log,
	})
	if err != nil {
		return err
	}
	if err := r.Start(ctx); err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			r.Kill()
		}
	}()
	p.say("")
	p.say("== 1. A runner (runner-1, echo agent, claim TTL %s) serves the stream. Three posts:", ttl)
	for _, m := range []struct{ thread, text string }{
		{"alpha", "hello"},
		{"beta", "ask: what is your name?"},
		{"alpha", "how are you?"},
	} {
		if _, err := post(ctx, store, m.thread, m.text); err != nil {
			return err
		}
	}
	if err := p.waitThread(ctx, "alpha", "both runs", settled(2)); err != nil {
		return err
	}
	err = p.waitThread(ctx, "beta", "the request", func(t *projections.Thread) bool { return len(t.OpenRequests()) > 0 })
	if err != nil {
		return err
	}
	p.say("")
	p.say("== 2. alpha's runs ran one after the other. beta's run asked a question and waits;")
	p.say("   the next message posted to beta is consumed as its answer (answer_given, fenced):")
	if _, err := post(ctx, store, "beta", "Ada"); err != nil {
		return err
	}
	if err := p.waitThread(ctx, "beta", "its run", settled(2)); err != nil {
		return err
	}
	p.say("")
	p.say("== 3. Stopping runner-1 gracefully: runs finish, claims are released:")
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stopped = true
	if err := r.Stop(sctx); err != nil {
		return err
	}
	return p.waitThread(ctx, "beta", "the release", func(t *projections.Thread) bool { return t.Claim.Released })
}

func post(ctx context.Context, store events.Poster, thread, text string) (events.Ack, error) {
	return store.Post(ctx, thread, &eventspb.MessagePosted{Author: "demo", Text: text})
}

// demoLapse stages the lapse counterexample (spec/README.md) on the real
// store, and shows the fence refusing the stale holder's write.
func demoLapse(ctx context.Context, p *livePrinter, storeA *natsstore.Store, url string, ttl time.Duration, log *slog.Logger) error {
	const th = "gamma"
	// B is another process: its own connection and store handle.
	storeB, err := natsstore.New(ctx, natsstore.Config{URL: url, Logger: log})
	if err != nil {
		return err
	}
	defer storeB.Close()
	p.say("")
	p.say("== 4. A claim lapse, step by step, on thread %s. No runner: two holders, A and B,", th)
	p.say("   drive the claim protocol by hand, as two runners in two processes would.")
	ack, err := post(ctx, storeA, th, "summarize the report")
	if err != nil {
		return err
	}
	if err := p.waitSeq(ctx, ack.Seq); err != nil {
		return err
	}
	cA, histA, err := events.AcquireClaim(ctx, storeA, th, "A/demo", ttl, time.Now())
	if err != nil {
		return fmt.Errorf("A's claim: %w", err)
	}
	if err := p.waitSeq(ctx, cA.Seq); err != nil {
		return err
	}
	p.say("-- A took the lease (revision %d, TTL %s) and appended its claim marker at seq %d:", cA.Lease.Revision, ttl, cA.Seq)
	p.say("   claim_seq %d is A's fencing token.", cA.Seq)
	m, ok := projections.Fold(th, histA).OldestPending()
	if !ok {
		return errors.New("A sees no pending message")
	}
	runA := fmt.Sprintf("run-%d-%d", m.Seq, cA.Seq)
	startA := events.NewRunStarted(cA, time.Now(), runA, m.Seq, "echo")
	p.say("-- A replayed the thread and planned %s for message %d; its run_started is ready,", runA, m.Seq)
	p.say("   fenced by claim_seq %d. Then A stalls (a GC pause, a frozen VM, a partition):", cA.Seq)
	p.say("   it neither renews its lease nor writes.")
	t0 := time.Now()
	if err := waitLapse(ctx, storeB, th, ttl); err != nil {
		return err
	}
	p.say("-- After %s A's lease has lapsed, by B's clock. A does not know: it is stalled.", time.Since(t0).Round(10*time.Millisecond))
	cB, histB, err := events.AcquireClaim(ctx, storeB, th, "B/demo", ttl, time.Now())
	if err != nil {
		return fmt.Errorf("B's claim: %w", err)
	}
	if err := p.waitSeq(ctx, cB.Seq); err != nil {
		return err
	}
	p.say("-- B took the lapsed lease (revision %d) and appended its claim marker at seq %d.", cB.Lease.Revision, cB.Seq)
	vB := projections.Fold(th, histB)
	mB, ok := vB.OldestPending()
	if !ok || vB.ActiveRun != nil {
		return errors.New("B should see message pending and no run active")
	}
	p.say("-- B replayed the thread: no run is active (A's never started) and message %d is", mB.Seq)
	p.say("   pending, so B plans a run for it, the same message A planned for.")
	runB := fmt.Sprintf("run-%d-%d", mB.Seq, cB.Seq)
	ackB, err := storeB.Append(ctx, events.NewRunStarted(cB, time.Now(), runB, mB.Seq, "echo"), events.Fenced(cB))
	if err != nil {
		return fmt.Errorf("B's run_started: %w", err)
	}
	if err := p.waitSeq(ctx, ackB.Seq); err != nil {
		return err
	}
	p.say("-- B's run_started landed at seq %d: message %d is the prompt of %s.", ackB.Seq, mB.Seq, runB)
	if err := demoRefusal(ctx, p, storeA, th, startA, cA, cB, ackB.Seq, m.Seq); err != nil {
		return err
	}
	return demoFinishB(ctx, p, storeB, cB, runB, ackB.Seq, "echo: "+m.Text)
}

// waitLapse waits until thread's lease is no longer live by store's clock.
func waitLapse(ctx context.Context, store events.Store, thread string, ttl time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, 3*ttl+5*time.Second)
	defer cancel()
	tick := time.NewTicker(min(ttl/20, 50*time.Millisecond))
	defer tick.Stop()
	for {
		_, live, err := store.GetLease(ctx, thread)
		if err != nil {
			return err
		}
		if !live {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("A's lease never lapsed: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// demoRefusal sends A's stale run_started and shows that the fence refused
// it and that nothing was written.
func demoRefusal(ctx context.Context, p *livePrinter, storeA events.Store, th string, startA *eventspb.Event, cA, cB events.Claim, lastRun, msg uint64) error {
	p.say("-- A wakes up and sends the run_started it planned, fenced by its claim_seq %d...", cA.Seq)
	_, err := storeA.Append(ctx, startA, events.Fenced(cA))
	if !errors.Is(err, events.ErrThreadBusy) {
		return fmt.Errorf("the fence should have refused A's run_started with ErrThreadBusy; got %v", err)
	}
	after, lerr := storeA.LastSeq(ctx, th, events.KindRun)
	if lerr != nil {
		return lerr
	}
	if after != lastRun {
		return fmt.Errorf("A's refused run_started wrote something: the run subject moved from %d to %d", lastRun, after)
	}
	subj := events.Subjects{}
	p.say("-- A's run_started was REFUSED by the fence (ErrThreadBusy): nothing written.")
	p.say("   error: %v", err)
	p.say("   The last event on %s is still seq %d, B's run_started.", subj.Thread(th, events.KindRun), lastRun)
	p.say("   Why: A's append carried Nats-Expected-Last-Subject-Sequence: %d with", cA.Seq)
	p.say("   Nats-Expected-Last-Subject-Sequence-Subject: %s, but the last claim marker", subj.Thread(th, events.KindClaim))
	p.say("   there is B's, seq %d, so JetStream refused the write atomically. Without the", cB.Seq)
	p.say("   fence, message %d would be the prompt of two runs (I1) and two runs would be", msg)
	p.say("   active at once (I3): the lapse counterexample of spec/. The lease only decides who should")
	p.say("   work; the newest claim marker decides whose writes land, whatever the clocks say.")
	p.say("-- A stops (I4): its refused run consumed nothing; the thread is B's.")
	return nil
}

// demoFinishB completes B's run and releases B's claim, as a runner would.
func demoFinishB(ctx context.Context, p *livePrinter, storeB events.Store, cB events.Claim, runB string, lastRun uint64, out string) error {
	p.say("-- B's agent answers; B records the run's end and releases its claim:")
	ack, err := storeB.Append(ctx, events.NewRunOutput(cB, time.Now(), runB, out), events.ExpectLast(lastRun))
	if err != nil {
		return fmt.Errorf("B's run_output: %w", err)
	}
	ack, err = storeB.Append(ctx, events.NewRunCompleted(cB, time.Now(), runB, out), events.ExpectLast(ack.Seq))
	if err != nil {
		return fmt.Errorf("B's run_completed: %w", err)
	}
	if err := events.ReleaseClaim(ctx, storeB, cB, "done", time.Now()); err != nil {
		return fmt.Errorf("B's release: %w", err)
	}
	return p.waitThread(ctx, cB.Thread, "B's release", func(t *projections.Thread) bool { return t.Claim.Released })
}

// demoSummary shows the lapse thread's state, every thread, and the audit.
func demoSummary(ctx context.Context, p *livePrinter, store *natsstore.Store) error {
	envs, err := store.Load(ctx, "gamma", 1)
	if err != nil {
		return err
	}
	p.say("")
	p.say("== 5. The thread's final state (artifactr show gamma):")
	p.mu.Lock()
	err = writeShow(p.w, projections.Fold("gamma", envs))
	p.mu.Unlock()
	if err != nil {
		return err
	}
	sums, err := listSummaries(ctx, store)
	if err != nil {
		return err
	}
	p.say("")
	p.say("== 6. Every thread (artifactr threads):")
	p.mu.Lock()
	err = writeSummaries(p.w, sums)
	p.mu.Unlock()
	if err != nil {
		return err
	}
	r, err := auditStream(ctx, store, 1, audit.Options{}, newProgress(nil))
	if err != nil {
		return err
	}
	p.say("")
	p.say("== 7. The audit replays the whole log and checks the invariants (artifactr audit):")
	p.mu.Lock()
	err = r.WriteText(p.w)
	p.mu.Unlock()
	if err != nil {
		return err
	}
	if !r.OK() {
		return fmt.Errorf("the audit found %d violations", r.ViolationCount)
	}
	p.say("")
	p.say("== Done: every message was consumed once, and the stale write was refused.")
	return nil
}
