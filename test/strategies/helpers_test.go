package strategies_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/doubletext"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/audit"
	"github.com/artifactr/artifactr/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every poll of these tests; conditions are polled, never slept
// for.
const wait = 30 * time.Second

// storeKind names a store the tests run against.
type storeKind string

const (
	mem  storeKind = "memstore"
	nats storeKind = "natsstore"
)

var kinds = []storeKind{mem, nats}

// newStore returns a fresh store of kind k for t, closed when t ends.
func newStore(t *testing.T, k storeKind) events.Store {
	t.Helper()
	if k == mem {
		return memstore.New(memstore.Config{})
	}
	srv := natsembedtest.RunForTest(t)
	s, err := natsstore.New(t.Context(), natsstore.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// startRunner starts a runner on s with ag, stopped when t ends.
func startRunner(t *testing.T, s events.Store, ag agent.Agent) *runner.Runner {
	t.Helper()
	r, err := runner.New(runner.Config{
		Store: s, Agent: ag, ClaimTTL: 3 * time.Second, IdleTimeout: time.Minute, ShutdownGrace: time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("runner stop: %v", err)
		}
	})
	return r
}

// post posts text to th with strategy st through the client side of the
// strategies (reject reads the thread first).
func post(ctx context.Context, s events.Store, th, text string, st events.Strategy) (events.Ack, error) {
	return doubletext.Poster{Store: s}.Post(ctx, th, &eventspb.MessagePosted{Text: text, Author: "test", Strategy: string(st)})
}

func mustPost(t *testing.T, s events.Store, th, text string, st events.Strategy) uint64 {
	t.Helper()
	ack, err := post(t.Context(), s, th, text, st)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Seq
}

func load(t *testing.T, s events.Store, th string) []events.Envelope {
	t.Helper()
	envs, err := s.Load(context.Background(), th, 1)
	if err != nil {
		t.Fatal(err)
	}
	return envs
}

func fold(t *testing.T, s events.Store, th string) *projections.Thread {
	t.Helper()
	return projections.Fold(th, load(t, s, th))
}

// activeRun waits for a run active in th, other than the runs in not.
func activeRun(t *testing.T, s events.Store, th string, not ...string) *projections.Run {
	t.Helper()
	var r *projections.Run
	testkit.CheckFor(t, wait, func() error {
		r = fold(t, s, th).ActiveRun
		if r == nil || contains(not, r.ID) {
			return fmt.Errorf("%s: no new active run", th)
		}
		return nil
	})
	return r
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// ended waits for run id of th to end and returns it.
func ended(t *testing.T, s events.Store, th, id string) *projections.Run {
	t.Helper()
	var r *projections.Run
	testkit.CheckFor(t, wait, func() error {
		for _, x := range fold(t, s, th).Runs {
			if x.ID == id && x.Status != projections.RunActive {
				r = x
				return nil
			}
		}
		return fmt.Errorf("%s: run %s has not ended", th, id)
	})
	return r
}

// settled waits until every message of th is consumed and no run is active.
func settled(t *testing.T, s events.Store, th string) *projections.Thread {
	t.Helper()
	var v *projections.Thread
	testkit.CheckFor(t, wait, func() error {
		v = fold(t, s, th)
		if n := len(v.Pending()); n > 0 || v.ActiveRun != nil {
			return fmt.Errorf("%s: %d pending, active run %v", th, n, v.ActiveRun != nil)
		}
		return nil
	})
	return v
}

// checkLog audits the threads' logs (I1, I3, the fence, RejectOnlyIdle,
// ...), validates them against the spec, and checks the fold saw no
// anomaly.
func checkLog(t *testing.T, s events.Store, threads ...string) {
	t.Helper()
	a := audit.New()
	v := spec.NewTraceValidator()
	for _, th := range threads {
		envs := load(t, s, th)
		for _, e := range envs {
			a.Add(e)
			v.Add(e)
		}
		if f := projections.Fold(th, envs); len(f.Anomalies) > 0 {
			t.Errorf("%s: fold anomalies: %+v", th, f.Anomalies)
		}
	}
	rep := a.Report()
	if !rep.OK() || rep.AnomalyCount > 0 {
		var b strings.Builder
		_ = rep.WriteText(&b)
		t.Errorf("audit:\n%s", b.String())
	}
	if tr := v.Report(); !tr.OK() {
		t.Errorf("spec: %s", tr.Nonconforming[0])
	}
}

// storedOf returns the stored time of the event at seq in th.
func storedOf(t *testing.T, s events.Store, th string, seq uint64) time.Time {
	t.Helper()
	for _, e := range load(t, s, th) {
		if e.Seq == seq {
			return e.Stored
		}
	}
	t.Fatalf("%s: no event %d", th, seq)
	return time.Time{}
}
