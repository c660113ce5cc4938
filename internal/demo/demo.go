package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/bench"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/server"
)

// Config configures the tour.
type Config struct {
	// Out gets the tour: narration and every event, live. Required.
	Out io.Writer
	// ClaimTTL is the session TTL of the tour's claims; the lapse takes this
	// long. Required.
	ClaimTTL time.Duration
	// Format is one event's line, as the CLI's watch prints it. Required.
	Format func(events.Envelope) string
	// Logger logs for the stores and the runner. Default discards.
	Logger *slog.Logger
	// NATSLogger logs for the embedded server. Default discards.
	NATSLogger *slog.Logger
	// Summary, if set, ends the tour on the store the tour wrote: the CLI
	// shows the lapse thread, every thread and the audit as its commands
	// do, writing through t.
	Summary func(ctx context.Context, t *Tour, store *natsstore.Store) error
}

// LapseThread is the thread the claim lapse is staged on.
const LapseThread = "gamma"

// Run runs the tour on an embedded server in a new temporary directory,
// on a free loopback port; it removes it all at the end. Its data is not
// fsynced (the tour says so): nothing of it has to survive. It returns an
// error when a step did not go as told.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NATSLogger == nil {
		cfg.NATSLogger = slog.New(slog.DiscardHandler)
	}
	ts, err := bench.StartTemp(ctx, "artifactr-demo-", true, cfg.NATSLogger, cfg.Logger)
	if err != nil {
		return err
	}
	defer ts.Close()
	srv, store := ts.Srv, ts.Store

	p := newTour(cfg.Out, "    | ", cfg.Format)
	p.Say("== artifactr demo: embedded NATS at %s, data in %s (thrown away)", srv.ClientURL(), ts.Dir)
	p.Say("   Every event is shown live as: time, seq, thread, type, fields.")
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

	if err := demoRuns(ctx, p, store, cfg.ClaimTTL, cfg.Logger); err != nil {
		return err
	}
	if err := demoLapse(ctx, p, store, srv.ClientURL(), cfg.ClaimTTL, cfg.Logger); err != nil {
		return err
	}
	if cfg.Summary == nil {
		return nil
	}
	return cfg.Summary(ctx, p, store)
}

// demoRuns shows a runner with the echo agent at work, then stops it
// gracefully.
func demoRuns(ctx context.Context, p *Tour, store *natsstore.Store, ttl time.Duration, log *slog.Logger) error {
	// The runner is wired as serve's is.
	s, err := server.Start(ctx, server.Config{
		Store: store,
		Runner: runner.Config{Agent: agent.Echo{}, ID: "runner-1", ClaimTTL: ttl,
			IdleTimeout: time.Minute, ShutdownGrace: 2 * time.Second},
		Logger: log,
	})
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			s.Kill()
		}
	}()
	p.Say("")
	p.Say("== 1. A runner (runner-1, echo agent, claim TTL %s) serves the stream. Three posts:", ttl)
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
	p.Say("")
	p.Say("== 2. alpha's runs ran one after the other. beta's run asked a question and waits;")
	p.Say("   the next message posted to beta is consumed as its answer (answer_given, fenced):")
	if _, err := post(ctx, store, "beta", "Ada"); err != nil {
		return err
	}
	if err := p.waitThread(ctx, "beta", "its run", settled(2)); err != nil {
		return err
	}
	p.Say("")
	p.Say("== 3. Stopping runner-1 gracefully: runs finish, claims are released:")
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stopped = true
	if err := s.Stop(sctx); err != nil {
		return err
	}
	return p.waitThread(ctx, "beta", "the release", func(t *projections.Thread) bool { return t.Claim.Released })
}

func post(ctx context.Context, store events.Poster, thread, text string) (events.Ack, error) {
	return store.Post(ctx, thread, &eventspb.MessagePosted{Author: "demo", Text: text})
}

// demoLapse stages the lapse counterexample (spec/README.md) on the real
// store, and shows the fence refusing the stale holder's write.
func demoLapse(ctx context.Context, p *Tour, storeA *natsstore.Store, url string, ttl time.Duration, log *slog.Logger) error {
	const th = LapseThread
	// B is another process: its own connection and store handle.
	storeB, err := natsstore.New(ctx, natsstore.Config{URL: url, Logger: log})
	if err != nil {
		return err
	}
	defer storeB.Close()
	p.Say("")
	p.Say("== 4. A claim lapse, step by step, on thread %s. No runner: two holders, A and B,", th)
	p.Say("   drive the claim protocol by hand, as two runners in two processes would.")
	ack, err := post(ctx, storeA, th, "summarize the report")
	if err != nil {
		return err
	}
	if err := p.waitSeq(ctx, ack.Seq); err != nil {
		return err
	}
	// Each holder claims under a runner session of its own, as a runner
	// does: the session is what lapses when its owner stalls.
	sessA, err := storeA.OpenSession(ctx, "A", ttl)
	if err != nil {
		return fmt.Errorf("A's session: %w", err)
	}
	cA, histA, err := events.AcquireSessionClaim(ctx, storeA, sessA, th, "A/demo", 0, time.Now())
	if err != nil {
		return fmt.Errorf("A's claim: %w", err)
	}
	if err := p.waitSeq(ctx, cA.Seq); err != nil {
		return err
	}
	p.Say("-- A opened a runner session (TTL %s). A took the lease under it (revision %d)", ttl, cA.Lease.Revision)
	p.Say("   and appended its claim marker at seq %d:", cA.Seq)
	p.Say("   claim_seq %d is A's fencing token.", cA.Seq)
	m, ok := projections.Fold(th, histA).OldestPending()
	if !ok {
		return errors.New("A sees no pending message")
	}
	runA := fmt.Sprintf("run-%d-%d", m.Seq, cA.Seq)
	startA := events.NewRunStarted(cA, time.Now(), runA, m.Seq, "echo")
	p.Say("-- A replayed the thread and planned %s for message %d; its run_started is ready,", runA, m.Seq)
	p.Say("   fenced by claim_seq %d. Then A stalls (a GC pause, a frozen VM, a partition):", cA.Seq)
	p.Say("   it neither renews its session nor writes.")
	t0 := time.Now()
	if err := waitLapse(ctx, storeB, th, ttl); err != nil {
		return err
	}
	p.Say("-- After %s A's session has lapsed, by B's clock, and every lease that lives by it", time.Since(t0).Round(10*time.Millisecond))
	p.Say("   with it. A does not know: it is stalled.")
	sessB, err := storeB.OpenSession(ctx, "B", ttl)
	if err != nil {
		return fmt.Errorf("B's session: %w", err)
	}
	// B's claim is released at the end; its session goes then, or lapses.
	defer func() { _ = storeB.CloseSession(context.WithoutCancel(ctx), sessB) }()
	cB, histB, err := events.AcquireSessionClaim(ctx, storeB, sessB, th, "B/demo", 0, time.Now())
	if err != nil {
		return fmt.Errorf("B's claim: %w", err)
	}
	if err := p.waitSeq(ctx, cB.Seq); err != nil {
		return err
	}
	p.Say("-- B opened a session of its own. B took the lapsed lease under it (revision %d)", cB.Lease.Revision)
	p.Say("   and appended its claim marker at seq %d.", cB.Seq)
	vB := projections.Fold(th, histB)
	mB, ok := vB.OldestPending()
	if !ok || vB.ActiveRun != nil {
		return errors.New("B should see message pending and no run active")
	}
	p.Say("-- B replayed the thread: no run is active (A's never started) and message %d is", mB.Seq)
	p.Say("   pending, so B plans a run for it, the same message A planned for.")
	runB := fmt.Sprintf("run-%d-%d", mB.Seq, cB.Seq)
	ackB, err := storeB.Append(ctx, events.NewRunStarted(cB, time.Now(), runB, mB.Seq, "echo"), events.Fenced(cB))
	if err != nil {
		return fmt.Errorf("B's run_started: %w", err)
	}
	if err := p.waitSeq(ctx, ackB.Seq); err != nil {
		return err
	}
	p.Say("-- B's run_started landed at seq %d: message %d is the prompt of %s.", ackB.Seq, mB.Seq, runB)
	if err := demoRefusal(ctx, p, storeA, th, startA, cA, cB, ackB.Seq, m.Seq); err != nil {
		return err
	}
	return demoFinishB(ctx, p, storeB, cB, runB, ackB.Seq, "echo: "+m.Text)
}

// waitLapse waits until thread's lease is no longer live by store's clock:
// its session lapsed.
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
			return fmt.Errorf("A's session never lapsed: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// demoRefusal sends A's stale run_started and shows that the fence refused
// it and that nothing was written.
func demoRefusal(ctx context.Context, p *Tour, storeA events.Store, th string, startA *eventspb.Event, cA, cB events.Claim, lastRun, msg uint64) error {
	p.Say("-- A wakes up and sends the run_started it planned, fenced by its claim_seq %d...", cA.Seq)
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
	p.Say("-- A's run_started was REFUSED by the fence (ErrThreadBusy): nothing written.")
	p.Say("   error: %v", err)
	p.Say("   The last event on %s is still seq %d, B's run_started.", subj.Thread(th, events.KindRun), lastRun)
	p.Say("   Why: A's append carried Nats-Expected-Last-Subject-Sequence: %d with", cA.Seq)
	p.Say("   Nats-Expected-Last-Subject-Sequence-Subject: %s, but the last claim marker", subj.Thread(th, events.KindClaim))
	p.Say("   there is B's, seq %d, so JetStream refused the write atomically. Without the", cB.Seq)
	p.Say("   fence, message %d would be the prompt of two runs (I1) and two runs would be", msg)
	p.Say("   active at once (I3): the lapse counterexample of spec/. The lease only decides who should")
	p.Say("   work; the newest claim marker decides whose writes land, whatever the clocks say.")
	p.Say("-- A stops (I4): its refused run consumed nothing; the thread is B's.")
	return nil
}

// demoFinishB completes B's run and releases B's claim, as a runner would.
func demoFinishB(ctx context.Context, p *Tour, storeB events.Store, cB events.Claim, runB string, lastRun uint64, out string) error {
	p.Say("-- B's agent answers; B records the run's end and releases its claim:")
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
