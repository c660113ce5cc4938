package runner_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
)

// heldStore holds the first run_output append, as a network partition
// would, until release is closed or the append's ctx ends.
type heldStore struct {
	*memstore.Store
	held    chan struct{} // closed when the output append is held
	release chan struct{}
	once    sync.Once
}

func (s *heldStore) Append(ctx context.Context, ev *eventspb.Event, chk events.Check, opts ...events.AppendOption) (events.Ack, error) {
	hold := false
	if ev.GetRunOutput() != nil {
		s.once.Do(func() { hold = true; close(s.held) })
	}
	if hold {
		select {
		case <-s.release:
		case <-ctx.Done():
			return events.Ack{}, ctx.Err()
		}
	}
	return s.Store.Append(ctx, ev, chk, opts...)
}

// outputVerdicts records the result of each run_output append.
type outputVerdicts struct {
	runner.NopObserver
	mu   sync.Mutex // protects errs
	errs []error
}

func (o *outputVerdicts) Appending(_ events.Claim, ev *eventspb.Event, _ *projections.Thread) func(events.Ack, error) {
	if ev.GetRunOutput() == nil {
		return func(events.Ack, error) {}
	}
	return func(_ events.Ack, err error) {
		o.mu.Lock()
		o.errs = append(o.errs, err)
		o.mu.Unlock()
	}
}

func (o *outputVerdicts) got() []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]error(nil), o.errs...)
}

// A write in flight when its actor stops (the actor saw a newer claim)
// still learns its verdict: the run's compare-and-set refuses it, and the
// observer hears a conflict, not "canceled". Before, the stop cancelled
// the wait, and the refusal was lost to the observer (the console shows
// this runner's refused stale writes: issue 26).
func TestRunner_staleWriteInFlightAtStopReportsItsRefusal(t *testing.T) {
	log := memstore.NewLog()
	s := &heldStore{Store: log.Open(memstore.Config{}), held: make(chan struct{}), release: make(chan struct{})}
	released := false
	defer func() {
		if !released {
			close(s.release)
		}
	}()
	obs := &outputVerdicts{}
	logs := new(testkit.SyncBuffer)
	r := startRunner(t, runner.Config{Store: s, ID: "A", ClaimTTL: time.Hour, Agent: agent.Echo{Delay: time.Hour},
		Observer: obs, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = r.Stop(ctx)
	}()
	const th = "inflight"
	post(t, s, th, "hello")
	select {
	case <-s.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the run's output append never came")
	}

	// Another holder takes the thread over and abandons A's run, as a
	// runner would once A's lease lapsed: a newer claim marker, then
	// run_abandoned on the run subject, fenced by it.
	v := fold(t, s, th)
	if v.ActiveRun == nil {
		t.Fatal("no active run")
	}
	ctx := context.Background()
	claimed := &eventspb.Event{Thread: th, Time: timestamppb.Now(), Holder: "B/1",
		Body: &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{Holder: "B/1"}}}
	ack, err := s.Store.Append(ctx, claimed, events.ExpectLast(v.Claim.Seq))
	if err != nil {
		t.Fatal(err)
	}
	b := events.Claim{Thread: th, Holder: "B/1", Seq: ack.Seq}
	abandon := events.NewRunAbandoned(b, time.Now(), v.ActiveRun.ID, v.ActiveRun.ClaimSeq, "taken over")
	if _, err := s.Store.Append(ctx, abandon, events.Fenced(b)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "A stops on the newer claim", func() (bool, string) {
		return strings.Contains(logs.String(), "claim lost; stopping"), logs.String()
	})

	// The partition heals: A's output reaches the store after the run
	// subject moved on.
	close(s.release)
	released = true
	testkit.WaitFor(t, 30*time.Second, "the output's verdict", func() (bool, string) {
		return len(obs.got()) == 1, "no verdict yet"
	})
	if err := obs.got()[0]; !errors.Is(err, events.ErrConflict) {
		t.Fatalf("the stale output's verdict: %v, want a refused compare-and-set (%v)", err, events.ErrConflict)
	}
	if n := len(fold(t, s, th).Runs[0].Outputs); n != 0 {
		t.Fatalf("the refused output was written: %d outputs", n)
	}
}
