package strategies_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/doubletext"
	"github.com/artifactr/artifactr/internal/testkit"
)

// A cancel request or thread_configured that is the last event on the
// posted subject is no work: a runner that releases an idle thread does not
// claim it again for it (it would, every idle timeout, for ever).
func TestIdleRelease_controlEventsAreNoWork(t *testing.T) {
	s := newStore(t, mem)
	r, err := runner.New(runner.Config{
		Store: s, Agent: agent.Echo{}, ClaimTTL: 3 * time.Second, IdleTimeout: 50 * time.Millisecond,
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
		_ = r.Stop(ctx)
	})
	th := "idle-control"
	mustPost(t, s, th, "hello", "")
	settled(t, s, th)
	// While the claim is held (or as it is released), control events land.
	if _, err := doubletext.Cancel(t.Context(), s, th, "", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := doubletext.Configure(t.Context(), s, th, events.StrategyInterrupt, time.Now()); err != nil {
		t.Fatal(err)
	}
	released := func() bool {
		v := fold(t, s, th)
		return v.Claim.Seq != 0 && v.Claim.Released
	}
	testkit.CheckFor(t, wait, func() error {
		if !released() || r.Stats().Held != 0 {
			return errSettling
		}
		return nil
	})
	claims := r.Stats().Claims
	// Bounded negative check: many idle timeouts pass with no new claim.
	deadline := time.Now().Add(20 * 50 * time.Millisecond)
	for time.Now().Before(deadline) {
		if n := r.Stats().Claims; n != claims {
			t.Fatalf("the thread was claimed again (%d claims, then %d) for control events only", claims, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	checkLog(t, s, th)
}

var errSettling = errorString("claim not released yet")

type errorString string

func (e errorString) Error() string { return string(e) }
