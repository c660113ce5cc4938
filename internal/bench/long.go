package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/doubletext"
	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/projections"
)

// LongConfig configures [Long]: `artifactr bench long`'s options.
type LongConfig struct {
	Events int // events in the long thread, at least 10
	Turns  int // closed-loop turns measured on each thread
	Posts  int // plain posts measured on each thread, in turn
	// Logger logs the errors of the server, the stores and the runners.
	// Default discards.
	Logger *slog.Logger
}

// LongReport is the figures of bench long, as its --json prints them.
type LongReport struct {
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
	// PostP50MsFresh is a plain post's p50 on the fresh thread, the posts
	// taken in turn with the long thread's; PostRatio is long / fresh.
	PostP50MsFresh float64 `json:"post_p50_ms_fresh"`
	PostRatio      float64 `json:"post_ratio"`
	// PostP50MsSettled and PostP99MsSettled are a plain post's on the long
	// thread when the previous post's run has ended: the post alone,
	// where the posts above overlap the runs of the posts before them.
	PostP50MsSettled float64 `json:"post_p50_ms_settled"`
	PostP99MsSettled float64 `json:"post_p99_ms_settled"`
	ClaimMs          float64 `json:"claim_ms"`
	HeldBytes        int64   `json:"held_bytes"`
	SnapshotBytes    int     `json:"snapshot_bytes"`
	BuildSeconds     float64 `json:"build_seconds"`
	// ShowMs and ShowAllMs are the median time of client.ThreadLast of
	// the newest ShowLast messages (artifactr show) and of client.Thread
	// (show --all) on the long thread; ShowEvents and ShowAllEvents the
	// events each read from the log.
	ShowLast      int     `json:"show_last"`
	ShowMs        float64 `json:"show_ms"`
	ShowEvents    int     `json:"show_events"`
	ShowAllMs     float64 `json:"show_all_ms"`
	ShowAllEvents int     `json:"show_all_events"`
}

const longThread, freshThread = "long", "fresh"

// Long builds one thread of about cfg.Events events directly (fsync off),
// restarts the embedded server with fsync on, and measures on it and on a
// fresh thread: closed-loop turns, plain posts, the claim after the
// restart, the heap held for it, and its snapshot's size.
func Long(ctx context.Context, cfg LongConfig) (*LongReport, error) {
	if cfg.Events < 10 || cfg.Turns < 1 || cfg.Posts < 1 {
		return nil, errors.New("bench: Events must be at least 10, Turns and Posts positive")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	quiet := cfg.Logger
	// The run fence layout, as serve makes a new stream.
	ts, err := startTemp(ctx, "artifactr-bench-long-", true, 1, natsstore.GuardAuto, natsstore.FenceRun, quiet, nil)
	if err != nil {
		return nil, err
	}
	defer func() { ts.Close() }()
	rep := &LongReport{Turns: cfg.Turns}
	t0 := time.Now()
	n, err := buildLong(ctx, ts.Store, cfg.Events)
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	rep.Events, rep.BuildSeconds = n, time.Since(t0).Seconds()
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
	col := newClosedLoop()
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
	fresh, long, err := interleavedTurns(ctx, clients, col, cfg.Turns)
	if err != nil {
		return nil, err
	}
	rep.TurnsPerSecondFresh, rep.TurnsPerSecondLong = fresh.rate, long.rate
	rep.TurnRatio = long.rate / fresh.rate
	rep.TurnP50MsFresh, rep.TurnP99MsFresh = ms(pct(fresh.toEnd, 0.5)), ms(pct(fresh.toEnd, 0.99))
	rep.TurnP50MsLong, rep.TurnP99MsLong = ms(pct(long.toEnd, 0.5)), ms(pct(long.toEnd, 0.99))

	// Plain posts, taken in turn on the long thread and the fresh one,
	// so both see the same load.
	poster := doubletext.Poster{Store: clients}
	var posts, freshPosts []time.Duration
	for i := range cfg.Posts {
		for _, th := range []string{longThread, freshThread} {
			start := time.Now()
			if _, err := poster.Post(ctx, th, &eventspb.MessagePosted{MessageId: fmt.Sprintf("p%d", i), Author: "bench", Text: "plain post"}); err != nil {
				return nil, fmt.Errorf("post to %s: %w", th, err)
			}
			if th == longThread {
				posts = append(posts, time.Since(start))
			} else {
				freshPosts = append(freshPosts, time.Since(start))
			}
		}
	}
	rep.PostP50Ms, rep.PostP99Ms = ms(pct(posts, 0.5)), ms(pct(posts, 0.99))
	rep.PostP50MsFresh = ms(pct(freshPosts, 0.5))
	if rep.PostP50MsFresh > 0 {
		rep.PostRatio = rep.PostP50Ms / rep.PostP50MsFresh
	}
	settled, err := settledPosts(ctx, poster, col, cfg.Posts)
	if err != nil {
		return nil, err
	}
	rep.PostP50MsSettled, rep.PostP99MsSettled = ms(pct(settled, 0.5)), ms(pct(settled, 0.99))

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
	if err := measureShow(ctx, clients, rep); err != nil {
		return nil, fmt.Errorf("show: %w", err)
	}
	return rep, nil
}

// settledPosts times k plain posts to the long thread, each made once the
// previous one's run ended (the wait is not timed).
func settledPosts(ctx context.Context, poster doubletext.Poster, col *closedLoop, k int) ([]time.Duration, error) {
	var out []time.Duration
	for i := range k {
		start := time.Now()
		ack, err := poster.Post(ctx, longThread, &eventspb.MessagePosted{MessageId: fmt.Sprintf("s%d", i), Author: "bench", Text: "plain post"})
		if err != nil {
			return nil, fmt.Errorf("post to %s: %w", longThread, err)
		}
		out = append(out, time.Since(start))
		select {
		case <-col.wait(ack.Seq):
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the run of %s seq %d: %w", longThread, ack.Seq, ctx.Err())
		}
	}
	return out, nil
}

// showLast is the --last of the show measured: show's default.
const showLast = 50

// measureShow times show and show --all of the long thread, three times
// each, and counts the events they read.
func measureShow(ctx context.Context, s *natsstore.Store, rep *LongReport) error {
	cs := &countingStore{Store: s}
	cl := client.New(cs) // not closed: s is the caller's
	var last, all []time.Duration
	for range 3 {
		cs.n = 0
		start := time.Now()
		w, err := cl.ThreadLast(ctx, longThread, showLast)
		if err != nil {
			return err
		}
		last = append(last, time.Since(start))
		rep.ShowEvents, rep.ShowLast = cs.n, len(w.Messages)
		cs.n = 0
		start = time.Now()
		if _, err := cl.Thread(ctx, longThread); err != nil {
			return err
		}
		all = append(all, time.Since(start))
		rep.ShowAllEvents = cs.n
	}
	slices.Sort(last)
	slices.Sort(all)
	rep.ShowMs, rep.ShowAllMs = ms(last[1]), ms(all[1])
	return nil
}

// countingStore counts the envelopes loaded through it; one goroutine
// uses it.
type countingStore struct {
	client.Store
	n int
}

func (s *countingStore) Load(ctx context.Context, thread string, from uint64) ([]events.Envelope, error) {
	envs, err := s.Store.Load(ctx, thread, from)
	s.n += len(envs)
	return envs, err
}

// buildLong writes a thread of about n events directly: posts and echo
// turns (run_started, run_output, run_completed) under one claim, which it
// releases. It returns the thread's number of events.
func buildLong(ctx context.Context, s *natsstore.Store, n int) (int, error) {
	now := time.Now()
	// A session of its own, as a runner's: the build writes for less than
	// its TTL, so it needs no renewal.
	sess, err := s.OpenSession(ctx, "builder", time.Hour)
	if err != nil {
		return 0, err
	}
	defer func() { _ = s.CloseSession(context.WithoutCancel(ctx), sess) }()
	c, _, err := events.AcquireSessionClaim(ctx, s, sess, longThread, "builder", 0, now)
	if err != nil {
		return 0, err
	}
	// k is the run subject's last sequence, which a consuming write and
	// the release expect in the run fence layout.
	k, err := s.LastSeq(ctx, longThread, events.KindRun)
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
		st, err := s.Append(ctx, events.NewRunStarted(c, now, run, ack.Seq, "echo"), events.FencedGuarded(c, k))
		if err != nil {
			return 0, err
		}
		out, err := s.Append(ctx, events.NewRunOutput(c, now, run, "echo: "+text), events.ExpectLast(st.Seq))
		if err != nil {
			return 0, err
		}
		end, err := s.Append(ctx, events.NewRunCompleted(c, now, run, "echo: "+text), events.ExpectLast(out.Seq))
		if err != nil {
			return 0, err
		}
		k = end.Seq
		written += 4
	}
	if err := events.ReleaseClaimAt(ctx, s, c, k, "built", now); err != nil {
		return 0, err
	}
	return written + 1, nil
}

// warmSnapshot runs one turn on the long thread and stops the runner, whose
// release saves the thread's snapshot.
func warmSnapshot(ctx context.Context, s *natsstore.Store, log *slog.Logger) error {
	col := newClosedLoop()
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
func restartSynced(ctx context.Context, ts *Temp) error {
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

// turnStats are the figures of a run of closed-loop turns on one thread.
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

// heapAfterGC returns the heap in use after two collections.
func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// LookupFirstPost passes the window's lookups to the store's first-post
// index, so that show's figures include them.
func (s *countingStore) LookupFirstPost(ctx context.Context, thread, id string, seq uint64) (uint64, bool, error) {
	if l, ok := s.Store.(events.FirstPostLookup); ok {
		return l.LookupFirstPost(ctx, thread, id, seq)
	}
	return 0, false, nil
}

// FirstPost completes events.FirstPostLookup; show never writes an entry.
func (s *countingStore) FirstPost(ctx context.Context, thread, id string, seq uint64) (uint64, error) {
	if l, ok := s.Store.(events.FirstPosts); ok {
		return l.FirstPost(ctx, thread, id, seq)
	}
	return 0, nil
}
