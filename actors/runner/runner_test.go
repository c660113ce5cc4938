package runner_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/audit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func startRunner(t *testing.T, cfg runner.Config) *runner.Runner {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	r, err := runner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}

func post(t *testing.T, s events.Store, th, text string) uint64 {
	t.Helper()
	ack, err := s.Post(context.Background(), th, &eventspb.MessagePosted{Text: text, Author: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return ack.Seq
}
func fold(t *testing.T, s events.Store, th string) *projections.Thread {
	envs, err := s.Load(context.Background(), th, 1)
	if err != nil {
		t.Fatal(err)
	}
	return projections.Fold(th, envs)
}

// settled: every message consumed and no run active.
func settled(t *testing.T, s events.Store, threads ...string) func() (bool, string) {
	return func() (bool, string) {
		for _, th := range threads {
			v := fold(t, s, th)
			if len(v.Pending()) > 0 || v.ActiveRun != nil {
				return false, fmt.Sprintf("%s: %d pending, active %v", th, len(v.Pending()), v.ActiveRun != nil)
			}
		}
		return true, ""
	}
}

func auditClean(t *testing.T, s events.Store, threads ...string) {
	t.Helper()
	a := audit.New()
	for _, th := range threads {
		envs, err := s.Load(context.Background(), th, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range envs {
			a.Add(e)
		}
	}
	if rep := a.Report(); !rep.OK() {
		t.Fatalf("audit found violations: %+v", rep.Violations)
	}
}

func TestRunner_answersPosts(t *testing.T) {
	s := memstore.New(memstore.Config{})
	r := startRunner(t, runner.Config{Store: s, ClaimTTL: 2 * time.Second})
	threads := []string{"a", "b", "c"}
	for i := range 3 {
		for _, th := range threads {
			post(t, s, th, fmt.Sprintf("%s-%d", th, i))
		}
	}
	testkit.WaitFor(t, 10*time.Second, "every message answered", settled(t, s, threads...))
	for _, th := range threads {
		v := fold(t, s, th)
		for _, run := range v.Runs {
			if run.Status != projections.RunCompleted || run.Output == "" {
				t.Fatalf("%s run %s: status %s output %q", th, run.ID, run.Status, run.Output)
			}
		}
		if len(v.Runs) != 3 {
			t.Fatalf("%s: %d runs, want 3", th, len(v.Runs))
		}
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	auditClean(t, s, threads...)
	for _, th := range threads {
		if v := fold(t, s, th); !v.Claim.Released {
			t.Fatalf("%s: claim not released after Stop", th)
		}
	}
}

// TestRunner_subjectsFromStore: the runner follows the subjects its store
// writes; there is no separate setting that could name others.
func TestRunner_subjectsFromStore(t *testing.T) {
	s := memstore.New(memstore.Config{Subjects: events.Subjects{Prefix: "convs"}})
	r := startRunner(t, runner.Config{Store: s})
	defer r.Stop(context.Background())
	post(t, s, "p", "hello")
	testkit.WaitFor(t, 10*time.Second, "the post answered under prefix convs", settled(t, s, "p"))
	v := fold(t, s, "p")
	if len(v.Runs) != 1 || v.Runs[0].Status != projections.RunCompleted {
		t.Fatalf("runs %+v", v.Runs)
	}
}

func TestRunner_requestAnswered(t *testing.T) {
	s := memstore.New(memstore.Config{})
	r := startRunner(t, runner.Config{Store: s})
	defer r.Stop(context.Background())
	post(t, s, "q", "ask: your name?")
	testkit.WaitFor(t, 10*time.Second, "the request opened", func() (bool, string) {
		v := fold(t, s, "q")
		return len(v.OpenRequests()) == 1, fmt.Sprintf("%d open requests", len(v.OpenRequests()))
	})
	post(t, s, "q", "bob")
	testkit.WaitFor(t, 10*time.Second, "the run completed", settled(t, s, "q"))
	v := fold(t, s, "q")
	if len(v.Runs) != 1 || v.Runs[0].Status != projections.RunCompleted || v.Runs[0].Output != "echo: your name? -> bob" {
		t.Fatalf("runs %+v", v.Runs[0])
	}
}

// A runner killed mid-run leaves its lease to lapse; another takes the
// thread over, abandons the dead run and answers the rest.
func TestRunner_takeoverAfterKill(t *testing.T) {
	log := memstore.NewLog()
	s := log.Open(memstore.Config{})
	ttl := 300 * time.Millisecond
	a := startRunner(t, runner.Config{Store: s, ID: "A", ClaimTTL: ttl, Agent: agent.Echo{Delay: time.Hour}})
	post(t, s, "k", "one")
	post(t, s, "k", "two")
	testkit.WaitFor(t, 10*time.Second, "A's run active", func() (bool, string) {
		v := fold(t, s, "k")
		return v.ActiveRun != nil, "no active run"
	})
	a.Kill()
	b := startRunner(t, runner.Config{Store: log.Open(memstore.Config{}), ID: "B", ClaimTTL: ttl})
	defer b.Stop(context.Background())
	testkit.WaitFor(t, 10*time.Second, "B answers the rest", settled(t, s, "k"))
	v := fold(t, s, "k")
	if len(v.Runs) != 2 || v.Runs[0].Status != projections.RunAbandoned || v.Runs[1].Status != projections.RunCompleted {
		t.Fatalf("runs: %+v %+v", v.Runs[0], v.Runs[len(v.Runs)-1])
	}
	auditClean(t, s, "k")
	if st := b.Stats(); st.Abandoned != 1 || st.Claims < 1 {
		t.Fatalf("B's stats %+v, want one abandon", st)
	}
}

// Stop cancels a run that outlives the grace, records its end and releases.
func TestRunner_stopHandsOver(t *testing.T) {
	s := memstore.New(memstore.Config{})
	r := startRunner(t, runner.Config{Store: s, Agent: agent.Echo{Delay: time.Hour}, ShutdownGrace: 50 * time.Millisecond})
	post(t, s, "s", "slow")
	post(t, s, "s", "next")
	testkit.WaitFor(t, 10*time.Second, "run active", func() (bool, string) { return fold(t, s, "s").ActiveRun != nil, "" })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	v := fold(t, s, "s")
	if v.ActiveRun != nil || !v.Claim.Released || v.Runs[0].Status != projections.RunFailed {
		t.Fatalf("after stop: active %v released %v run %+v", v.ActiveRun, v.Claim.Released, v.Runs[0])
	}
	if len(v.Pending()) != 1 {
		t.Fatalf("%d pending, want the unstarted message left for the next holder", len(v.Pending()))
	}
	auditClean(t, s, "s")
}

// Kill while the runner is busy claiming must not race its claim goroutines.
func TestRunner_killWhileClaiming(t *testing.T) {
	for i := range 50 {
		s := memstore.New(memstore.Config{})
		r := startRunner(t, runner.Config{Store: s})
		for th := range 20 {
			post(t, s, fmt.Sprintf("k%d-%d", i, th), "x")
		}
		r.Kill()
	}
}

// flakyTails is a store whose first follows of the stream break: the runner
// must follow again, from where it was, and miss nothing.
type flakyTails struct {
	events.Store
	fails *atomic.Int32
}

type failingTail struct{}

func (failingTail) Next(context.Context) (events.Envelope, error) {
	return events.Envelope{}, fmt.Errorf("%w: tail broke (injected)", events.ErrUnavailable)
}
func (failingTail) Stop() {}

func (b flakyTails) Tail(ctx context.Context, filter string, from uint64) (events.Tail, error) {
	if b.fails.Add(-1) >= 0 {
		return failingTail{}, nil
	}
	return b.Store.Tail(ctx, filter, from)
}

// quietTails is a store whose first follow of the stream goes quiet: its
// Next returns nothing until its ctx ends, however many events are stored,
// as an ordered consumer that is never replaced does.
type quietTails struct {
	*memstore.Store // a PartitionReader: the follow can check its stream
	quiet           *atomic.Int32
}

type quietTail struct{}

func (quietTail) Next(ctx context.Context) (events.Envelope, error) {
	<-ctx.Done()
	return events.Envelope{}, ctx.Err()
}
func (quietTail) Stop() {}

func (q quietTails) Tail(ctx context.Context, filter string, from uint64) (events.Tail, error) {
	if q.quiet.Add(-1) >= 0 {
		return quietTail{}, nil
	}
	return q.Store.Tail(ctx, filter, from)
}

// A follow that goes quiet while the stream grows is opened again after
// the last event it routed: the post it missed is answered.
func TestRunner_followQuietReopens(t *testing.T) {
	defer runner.SetFollowIdle(50 * time.Millisecond)()
	s := memstore.New(memstore.Config{})
	quiet := &atomic.Int32{}
	quiet.Store(1)
	r := startRunner(t, runner.Config{Store: quietTails{s, quiet}})
	defer r.Stop(context.Background())
	post(t, s, "unheard", "x")
	testkit.WaitFor(t, 10*time.Second, "the post's run", settled(t, s, "unheard"))
	if quiet.Load() >= 0 {
		t.Fatalf("the quiet tail was not replaced (%d)", quiet.Load())
	}
	auditClean(t, s, "unheard")
}

// deafTails is a store whose follows never deliver, and that cannot say
// where its stream ends, so the runner cannot tell that they stall.
type deafTails struct{ events.Store }

func (deafTails) Tail(context.Context, string, uint64) (events.Tail, error) { return quietTail{}, nil }

// A thread actor whose events do not reach it through the follow (here,
// none do) reads those it knows are stored, its own writes and the log a
// sync read, from the store: the post it was woken for is answered and the
// claim released.
func TestRunner_catchUpWithoutFollow(t *testing.T) {
	defer runner.SetCatchUpWait(20 * time.Millisecond)()
	s := memstore.New(memstore.Config{})
	r := startRunner(t, runner.Config{Store: deafTails{s}, IdleTimeout: 100 * time.Millisecond, ShutdownGrace: time.Second})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.Stop(ctx)
	}()
	post(t, s, "deaf", "x")
	r.Wake("deaf")
	testkit.WaitFor(t, 10*time.Second, "the post answered and the claim released", func() (bool, string) {
		v := fold(t, s, "deaf")
		if ok, state := settled(t, s, "deaf")(); !ok {
			return false, state
		}
		return v.Claim.Released, fmt.Sprintf("claim %+v", v.Claim)
	})
	if n := r.Stats().CatchUps; n == 0 {
		t.Fatal("no catch-up read counted")
	}
	auditClean(t, s, "deaf")
}

func TestRunner_followBreaks(t *testing.T) {
	s := memstore.New(memstore.Config{})
	fails := &atomic.Int32{}
	fails.Store(3)
	r := startRunner(t, runner.Config{Store: flakyTails{s, fails}, Logger: slog.New(slog.DiscardHandler)})
	defer r.Stop(context.Background())
	testkit.WaitFor(t, 10*time.Second, "the follow to work again", func() (bool, string) {
		return fails.Load() < 0, fmt.Sprint(fails.Load())
	})
	post(t, s, "blind", "x")
	testkit.WaitFor(t, 10*time.Second, "the post's run", settled(t, s, "blind"))
	auditClean(t, s, "blind")
}
