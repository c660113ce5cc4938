package obs_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/internal/obs"
	"github.com/artifactr/artifactr/projections"
)

// benchTurn makes the observer calls of one turn: run_started appended,
// the run's context, run_completed appended.
func benchTurn(b *testing.B, o runner.Observer) {
	c := events.Claim{Thread: "bench", Seq: 3}
	view := &projections.Thread{ID: "bench", Messages: []projections.Message{{Seq: 1, Posted: time.Now()}}}
	view.Runs = []*projections.Run{{ID: "run-1-3", PromptSeq: 1, ClaimSeq: 3}}
	view.ActiveRun = view.Runs[0]
	started := events.NewRunStarted(c, time.Time{}, "run-1-3", 1, "echo")
	completed := events.NewRunCompleted(c, time.Time{}, "run-1-3", "out")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		o.Appending(c, started, view)(events.Ack{Seq: 4}, nil)
		_ = o.RunContext(ctx, c, "run-1-3")
		o.Appending(c, completed, view)(events.Ack{Seq: 5}, nil)
	}
}

// The cost per turn of observing with tracing off, to set beside a turn's
// (about a millisecond: four acknowledged appends). Run with
// go test -run - -bench Observer ./internal/obs/
func BenchmarkObserver_turn(b *testing.B) {
	b.Run("nop", func(b *testing.B) { benchTurn(b, runner.NopObserver{}) })
	b.Run("metrics+logs", func(b *testing.B) {
		m, err := obs.NewMetrics(prometheus.NewRegistry())
		if err != nil {
			b.Fatal(err)
		}
		benchTurn(b, obs.New(obs.Config{Metrics: m, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	})
	b.Run("metrics", func(b *testing.B) { // the run-end line filtered out by level, as bench turns logs
		m, err := obs.NewMetrics(prometheus.NewRegistry())
		if err != nil {
			b.Fatal(err)
		}
		quiet := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))
		benchTurn(b, obs.New(obs.Config{Metrics: m, Logger: quiet}))
	})
}

// benchRunner runs b.N echo turns over 8 threads of an in-memory store,
// observed by o, and reports the time per turn. In memory a turn costs tens
// of microseconds, so an observer's cost shows here if anywhere.
func benchRunner(b *testing.B, o runner.Observer) {
	s := memstore.New(memstore.Config{})
	quiet := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))
	r, err := runner.New(runner.Config{Store: s, Observer: o, Logger: quiet, ClaimTTL: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	tail, err := s.Tail(ctx, events.Subjects{}.AllOf(events.KindRun), 1)
	if err != nil {
		b.Fatal(err)
	}
	defer tail.Stop()
	if err := r.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer r.Kill()
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.Post(ctx, fmt.Sprintf("b%d", i%8), &eventspb.MessagePosted{Text: "x"}); err != nil {
			b.Fatal(err)
		}
	}
	for ended := 0; ended < b.N; {
		env, err := tail.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if env.Type == events.TypeRunCompleted {
			ended++
		}
	}
}

// Run with go test -run - -bench Runner -count 6 ./internal/obs/ and compare
// the two with benchstat.
func BenchmarkRunner_turns(b *testing.B) {
	b.Run("nop", func(b *testing.B) { benchRunner(b, runner.NopObserver{}) })
	b.Run("observer", func(b *testing.B) {
		m, err := obs.NewMetrics(prometheus.NewRegistry())
		if err != nil {
			b.Fatal(err)
		}
		quiet := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))
		benchRunner(b, obs.New(obs.Config{Metrics: m, Logger: quiet}))
	})
}
