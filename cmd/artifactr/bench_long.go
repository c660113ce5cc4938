package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/bench"
	"github.com/artifactr/artifactr/internal/doubletext"
	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/projections"
)

// longReport is what bench long prints with --json.
type longReport struct {
	Events              int     `json:"events"`
	Turns               int     `json:"turns"`
	TurnsPerSecondLong  float64 `json:"turns_per_second_long"`
	TurnsPerSecondFresh float64 `json:"turns_per_second_fresh"`
	TurnRatio           float64 `json:"turn_ratio"`
	TurnP50MsLong       float64 `json:"turn_p50_ms_long"`
	TurnP99MsLong       float64 `json:"turn_p99_ms_long"`
	TurnP50MsFresh      float64 `json:"turn_p50_ms_fresh"`
	TurnP99MsFresh      float64 `json:"turn_p99_ms_fresh"`
	PostP50Ms           float64 `json:"post_p50_ms"`
	PostP99Ms           float64 `json:"post_p99_ms"`
	ClaimMs             float64 `json:"claim_ms"`
	HeldBytes           int64   `json:"held_bytes"`
	SnapshotBytes       int     `json:"snapshot_bytes"`
	BuildSeconds        float64 `json:"build_seconds"`
}

type longFlags struct {
	events, turns, posts int
	json                 bool
	maxTime              time.Duration
}

func (a *app) benchLongCommand() *cobra.Command {
	var f longFlags
	cmd := &cobra.Command{
		Use:   "long",
		Short: "A thread of --events events against a fresh one: turn rate, post latency, claim time, memory, snapshot",
		Long: `Build one thread of --events events (posts and echo turns, written
directly, with fsync off), restart the embedded server with fsync on, and
measure on it and on a fresh thread in the same run:

  - the closed-loop turn rate and p50/p99 (--turns turns each, in blocks
    of ten taken in turn on the two threads, so both see the same load);
  - a plain post's client-side latency (--posts posts naming no strategy,
    through the reject check's path, as artifactr post does);
  - the claim after the restart: from the first post's stored time to its
    run_started (the claim, its replay, and the start);
  - the runner's heap held for the long thread beyond a fresh one (after
    a GC, both claimed and idle);
  - the size of the long thread's snapshot, as the runners save it.

Figures only: nothing is asserted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.events < 10 || f.turns < 1 || f.posts < 1 || f.maxTime <= 0 {
				return usagef("--events must be at least 10, --turns, --posts and --max-time positive")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.maxTime)
			defer cancel()
			rep, err := a.benchLong(ctx, &f)
			if err != nil {
				return fail(fmt.Errorf("bench long: %w", err))
			}
			if f.json {
				enc := json.NewEncoder(a.stdout)
				return enc.Encode(rep)
			}
			fmt.Fprintf(a.stdout, "bench long: %d events built in %.1fs\n", rep.Events, rep.BuildSeconds)
			fmt.Fprintf(a.stdout, "turns:    long %.0f/s (p50 %.2f ms, p99 %.2f ms), fresh %.0f/s (p50 %.2f ms, p99 %.2f ms), ratio %.2f\n",
				rep.TurnsPerSecondLong, rep.TurnP50MsLong, rep.TurnP99MsLong, rep.TurnsPerSecondFresh, rep.TurnP50MsFresh, rep.TurnP99MsFresh, rep.TurnRatio)
			fmt.Fprintf(a.stdout, "post:     p50 %.2f ms, p99 %.2f ms (client side, no --strategy)\n", rep.PostP50Ms, rep.PostP99Ms)
			fmt.Fprintf(a.stdout, "claim:    %.1f ms after a restart\n", rep.ClaimMs)
			fmt.Fprintf(a.stdout, "memory:   %d bytes of heap held for the long thread beyond a fresh one\n", rep.HeldBytes)
			fmt.Fprintf(a.stdout, "snapshot: %d bytes\n", rep.SnapshotBytes)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.events, "events", 100_000, "events in the long thread")
	fl.IntVar(&f.turns, "turns", 200, "closed-loop turns measured on each thread")
	fl.IntVar(&f.posts, "posts", 200, "plain posts measured on the long thread")
	fl.BoolVar(&f.json, "json", false, "print one JSON object")
	fl.DurationVar(&f.maxTime, "max-time", 30*time.Minute, "give up after this long")
	return cmd
}

const longThread, freshThread = "long", "fresh"

func (a *app) benchLong(ctx context.Context, f *longFlags) (*longReport, error) {
	ts, err := a.startTempServer(ctx, "artifactr-bench-long-", true, nil)
	if err != nil {
		return nil, err
	}
	defer func() { ts.Close() }()
	rep := &longReport{Turns: f.turns}
	t0 := time.Now()
	n, err := buildLong(ctx, ts.Store, f.events)
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	rep.Events, rep.BuildSeconds = n, time.Since(t0).Seconds()
	quiet := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	// One turn under a runner that then stops: its release leaves the
	// snapshot the claim after the restart starts from.
	if err := warmSnapshot(ctx, ts.Store, quiet); err != nil {
		return nil, fmt.Errorf("the first snapshot: %w", err)
	}
	if err := restartSynced(ctx, ts); err != nil {
		return nil, err
	}
	// Its own connection, as a client's; a long timeout for the load of
	// the whole thread that sizes its snapshot.
	clients, err := natsstore.New(ctx, natsstore.Config{URL: ts.Srv.ClientURL(), Logger: quiet, Timeout: 5 * time.Minute})
	if err != nil {
		return nil, err
	}
	defer clients.Close()
	col := &closedLoop{waiting: map[uint64]chan turnTimes{}, turns: map[uint64]*turnTimes{}, prompt: map[string]uint64{}}
	stop, err := followStream(ctx, clients, 0, col.add)
	if err != nil {
		return nil, err
	}
	defer stop()
	r, err := runner.New(runner.Config{Store: ts.Store, Agent: agent.Echo{}, ID: "bench-long", IdleTimeout: time.Hour, Logger: quiet})
	if err != nil {
		return nil, err
	}
	if err := r.Start(ctx); err != nil {
		return nil, err
	}
	defer r.Kill()

	// The fresh thread first, claimed, as the baseline of memory.
	if _, err := closedTurns(ctx, clients, col, freshThread, "f-claim", 1); err != nil {
		return nil, err
	}
	base := heapSettled(ctx)
	first, err := closedTurns(ctx, clients, col, longThread, "claim", 1)
	if err != nil {
		return nil, err
	}
	rep.ClaimMs = ms(first.toStart[0])
	rep.HeldBytes = heapSettled(ctx) - base
	fresh, long, err := interleavedTurns(ctx, clients, col, f.turns)
	if err != nil {
		return nil, err
	}
	rep.TurnsPerSecondFresh, rep.TurnsPerSecondLong = fresh.rate, long.rate
	rep.TurnRatio = long.rate / fresh.rate
	rep.TurnP50MsFresh, rep.TurnP99MsFresh = ms(pct(fresh.toEnd, 0.5)), ms(pct(fresh.toEnd, 0.99))
	rep.TurnP50MsLong, rep.TurnP99MsLong = ms(pct(long.toEnd, 0.5)), ms(pct(long.toEnd, 0.99))

	poster := doubletext.Poster{Store: clients}
	var posts []time.Duration
	for i := range f.posts {
		start := time.Now()
		if _, err := poster.Post(ctx, longThread, &eventspb.MessagePosted{MessageId: fmt.Sprintf("p%d", i), Author: "bench", Text: "plain post"}); err != nil {
			return nil, fmt.Errorf("post: %w", err)
		}
		posts = append(posts, time.Since(start))
	}
	rep.PostP50Ms, rep.PostP99Ms = ms(pct(posts, 0.5)), ms(pct(posts, 0.99))

	// The snapshot the runners keep: the warm-up's release saved it, of
	// the holder's compact view.
	data, err := clients.LoadSnapshot(ctx, longThread)
	if err != nil {
		return nil, err
	}
	if _, err := projections.DecodeSnapshot(longThread, data); err != nil {
		return nil, fmt.Errorf("the long thread's snapshot: %w", err)
	}
	rep.SnapshotBytes = len(data)
	return rep, nil
}

// buildLong writes a thread of about n events directly: posts and echo
// turns (run_started, run_output, run_completed) under one claim, which it
// releases. It returns the thread's number of events.
func buildLong(ctx context.Context, s *natsstore.Store, n int) (int, error) {
	now := time.Now()
	c, _, err := events.AcquireClaim(ctx, s, longThread, "builder", time.Hour, now)
	if err != nil {
		return 0, err
	}
	written := 1
	for i := 0; written+5 <= n; i++ {
		text := fmt.Sprintf("message %d of the long thread", i)
		ack, err := s.Post(ctx, longThread, &eventspb.MessagePosted{MessageId: fmt.Sprintf("b%d", i), Author: "bench", Text: text})
		if err != nil {
			return 0, err
		}
		run := fmt.Sprintf("b-run-%d", i)
		st, err := s.Append(ctx, events.NewRunStarted(c, now, run, ack.Seq, "echo"), events.Fenced(c))
		if err != nil {
			return 0, err
		}
		out, err := s.Append(ctx, events.NewRunOutput(c, now, run, "echo: "+text), events.ExpectLast(st.Seq))
		if err != nil {
			return 0, err
		}
		if _, err := s.Append(ctx, events.NewRunCompleted(c, now, run, "echo: "+text), events.ExpectLast(out.Seq)); err != nil {
			return 0, err
		}
		written += 4
	}
	if err := events.ReleaseClaim(ctx, s, c, "built", now); err != nil {
		return 0, err
	}
	return written + 1, nil
}

// warmSnapshot runs one turn on the long thread and stops the runner, whose
// release saves the thread's snapshot.
func warmSnapshot(ctx context.Context, s *natsstore.Store, log *slog.Logger) error {
	col := &closedLoop{waiting: map[uint64]chan turnTimes{}, turns: map[uint64]*turnTimes{}, prompt: map[string]uint64{}}
	stop, err := followStream(ctx, s, 0, col.add)
	if err != nil {
		return err
	}
	defer stop()
	r, err := runner.New(runner.Config{Store: s, Agent: agent.Echo{}, ID: "bench-warm", IdleTimeout: time.Hour, CallTimeout: time.Minute, Logger: log})
	if err != nil {
		return err
	}
	if err := r.Start(ctx); err != nil {
		return err
	}
	if _, err := closedTurns(ctx, s, col, longThread, "warm", 1); err != nil {
		r.Kill()
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := r.Stop(sctx); err != nil {
		return err
	}
	if st := r.Stats(); st.SnapshotsFailed > 0 {
		return fmt.Errorf("its snapshot was not saved")
	}
	return nil
}

// restartSynced restarts ts's server on its directory with fsync on.
func restartSynced(ctx context.Context, ts *bench.Temp) error {
	ts.Store.Close()
	cfg := ts.Srv.Config()
	ts.Srv.Shutdown()
	cfg.NoSync = false
	srv, err := natsembed.Start(cfg)
	if err != nil {
		return err
	}
	ts.Srv = srv
	ts.Store, err = natsstore.New(ctx, natsstore.Config{URL: srv.ClientURL(), Logger: slog.New(slog.DiscardHandler)})
	return err
}

type turnStats struct {
	rate           float64
	toStart, toEnd []time.Duration
}

// interleavedTurns runs k closed-loop turns on each thread, in blocks of
// ten taken in turn, so that both see the same load of a shared machine
// and their ratio means something.
func interleavedTurns(ctx context.Context, s *natsstore.Store, col *closedLoop, k int) (fresh, long turnStats, err error) {
	var tf, tl time.Duration
	for done := 0; done < k; done += 10 {
		n := min(10, k-done)
		for _, side := range []struct {
			thread, prefix string
			st             *turnStats
			took           *time.Duration
		}{{freshThread, "f", &fresh, &tf}, {longThread, "l", &long, &tl}} {
			start := time.Now()
			b, err := closedTurns(ctx, s, col, side.thread, fmt.Sprintf("%s%d-", side.prefix, done), n)
			if err != nil {
				return fresh, long, err
			}
			*side.took += time.Since(start)
			side.st.toStart = append(side.st.toStart, b.toStart...)
			side.st.toEnd = append(side.st.toEnd, b.toEnd...)
		}
	}
	fresh.rate, long.rate = float64(k)/tf.Seconds(), float64(k)/tl.Seconds()
	slices.Sort(fresh.toEnd)
	slices.Sort(long.toEnd)
	return fresh, long, nil
}

// closedTurns posts k messages to thread, each after the previous one's run
// ended, and times them.
func closedTurns(ctx context.Context, s *natsstore.Store, col *closedLoop, thread, prefix string, k int) (turnStats, error) {
	var ts turnStats
	start := time.Now()
	for j := range k {
		ack, err := s.Post(ctx, thread, &eventspb.MessagePosted{MessageId: fmt.Sprintf("%s%d", prefix, j), Author: "bench", Text: fmt.Sprintf("turn %d", j)})
		if err != nil {
			return ts, err
		}
		select {
		case t := <-col.wait(ack.Seq):
			ts.toStart = append(ts.toStart, t.started.Sub(t.posted))
			ts.toEnd = append(ts.toEnd, t.ended.Sub(t.posted))
		case <-ctx.Done():
			return ts, fmt.Errorf("waiting for the run of %s seq %d: %w", thread, ack.Seq, ctx.Err())
		}
	}
	ts.rate = float64(k) / time.Since(start).Seconds()
	slices.Sort(ts.toEnd)
	return ts, nil
}

// heapSettled returns the heap after the embedded server's block caches,
// which are in the same heap, expired (filestore's 10 s), and two GCs:
// else the difference of two readings is mostly the server's cache.
func heapSettled(ctx context.Context) int64 {
	select {
	case <-time.After(11 * time.Second):
	case <-ctx.Done():
	}
	return heapAfterGC()
}

func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
