package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
)

func (a *app) benchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure artifactr on an embedded server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(a.stderr)
			_ = cmd.Help()
			return silent(exitUsage, fmt.Errorf("bench needs a subcommand"))
		},
	}
	cmd.AddCommand(a.benchTurnsCommand(), a.benchAuditCommand(), a.benchScaleCommand(), a.benchHTTPCommand(), a.benchLongCommand())
	return cmd
}

// benchFlags are `bench turns` options.
type benchFlags struct {
	threads, messages int
	sync              bool
	closedLoop        bool
	noSync            bool
	maxTime           time.Duration
	claimTTL          time.Duration
	json              bool
	result            *benchTurnsJSON // with --json, the figures printed at the end
}

// jsonMode makes a command's text lines go to stderr, as progress, and
// returns where its --json document goes: stdout.
func (a *app) jsonMode() io.Writer {
	out := a.stdout
	a.stdout = a.stderr
	return out
}

func (a *app) benchTurnsCommand() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "turns",
		Short: "Turns per second and latencies with the echo agent, against raw JetStream appends",
		Long: `Start an embedded server in a temporary directory (writes not fsynced unless
--sync) and one runner with the echo agent; post --messages messages to each
of --threads threads, all at once, and follow the stream until every turn has
ended.

With --closed-loop it measures the chat shape instead (see the flag).

Prints turns/s, events/s, and the p50 and p99 latency from a message's post
to its run_started and to its run's end, measured with the server's stored
times. Then it measures plain JetStream publishes of the same number and size
of events, with as many concurrent publishers as threads, each waiting for
its ack, and prints the ratio. Figures only: nothing is asserted.

--json prints the figures as one object at the end (the text lines go to
stderr): {"mode","fsync","phases":[{"name","threads","turns",
"turns_per_second","events","events_per_second","cpu_ms_per_turn",
"start_p50_ms","start_p99_ms","end_p50_ms","end_p99_ms"}],
"raw_appends_per_second","events_per_raw_ratio"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.threads < 1 || f.messages < 1 {
				return usagef("--threads and --messages must be at least 1")
			}
			if f.maxTime <= 0 || f.claimTTL <= 0 {
				return usagef("--max-time and --claim-ttl must be positive")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.maxTime)
			defer cancel()
			var jsonOut io.Writer
			if f.json {
				jsonOut = a.jsonMode()
				f.result = &benchTurnsJSON{Mode: "open", Fsync: f.sync, Phases: []benchPhaseJSON{}}
			}
			run := a.benchTurns
			if f.closedLoop {
				run = a.benchClosedLoop
			}
			if err := run(ctx, &f); err != nil {
				return fail(fmt.Errorf("bench: %w", err))
			}
			if f.json {
				return writeJSON(jsonOut, f.result)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.threads, "threads", 8, "threads to post to")
	fl.IntVar(&f.messages, "messages", 50, "messages per thread")
	fl.BoolVar(&f.sync, "sync", false, "fsync every JetStream write, as serve does by default")
	fl.BoolVar(&f.closedLoop, "closed-loop", false, "the chat shape: each thread posts its next message after its last run ended, then one thread runs 200 turns in sequence (fsync on unless --no-sync)")
	fl.BoolVar(&f.noSync, "no-sync", false, "with --closed-loop: do not fsync")
	fl.DurationVar(&f.maxTime, "max-time", 5*time.Minute, "give up after this long")
	fl.DurationVar(&f.claimTTL, "claim-ttl", 10*time.Second, "the runner's lease TTL")
	fl.BoolVar(&f.json, "json", false, "print the figures as one JSON object")
	return cmd
}

// turnTimes are the stored times of one message's turn.
type turnTimes struct {
	posted, started, ended time.Time
}

// turnCollector follows the stream and times every turn.
type turnCollector struct {
	mu        sync.Mutex // protects the fields below
	turns     map[uint64]*turnTimes
	runPrompt map[string]uint64 // run id -> prompt seq
	ended     int
	events    int
	bytes     int
	first     time.Time // first post
	last      time.Time // last run end
	done      chan struct{}
	want      int
}

func newTurnCollector(want int) *turnCollector {
	return &turnCollector{turns: map[uint64]*turnTimes{}, runPrompt: map[string]uint64{}, done: make(chan struct{}), want: want}
}

func (c *turnCollector) turn(seq uint64) *turnTimes {
	t := c.turns[seq]
	if t == nil {
		t = &turnTimes{}
		c.turns[seq] = t
	}
	return t
}

func (c *turnCollector) add(env events.Envelope) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events++
	if env.Event != nil {
		c.bytes += proto.Size(env.Event)
	}
	switch b := env.Event.GetBody().(type) {
	case *eventspb.Event_MessagePosted:
		c.turn(env.Seq).posted = env.Stored
		if c.first.IsZero() {
			c.first = env.Stored
		}
	case *eventspb.Event_RunStarted:
		c.runPrompt[b.RunStarted.GetRunId()] = b.RunStarted.GetPromptSeq()
		c.turn(b.RunStarted.GetPromptSeq()).started = env.Stored
	case *eventspb.Event_RunCompleted, *eventspb.Event_RunFailed, *eventspb.Event_RunAbandoned:
		var id string
		switch b := b.(type) {
		case *eventspb.Event_RunCompleted:
			id = b.RunCompleted.GetRunId()
		case *eventspb.Event_RunFailed:
			id = b.RunFailed.GetRunId()
		case *eventspb.Event_RunAbandoned:
			id = b.RunAbandoned.GetRunId()
		}
		if seq, ok := c.runPrompt[id]; ok {
			c.turn(seq).ended = env.Stored
			c.last = env.Stored
			c.ended++
			if c.ended == c.want {
				close(c.done)
			}
		}
	}
}

func (a *app) benchTurns(ctx context.Context, f *benchFlags) error {
	ts, err := a.startTempServer(ctx, "artifactr-bench-", !f.sync, nil)
	if err != nil {
		return err
	}
	defer ts.Close()
	store := ts.Store
	quiet := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	syncNote := "not fsynced"
	if f.sync {
		syncNote = "fsync on every write"
	}
	fmt.Fprintf(a.stdout, "bench turns: %d threads x %d messages, embedded server (%s), echo agent\n", f.threads, f.messages, syncNote)

	col, elapsed, err := a.runTurns(ctx, store, f, quiet)
	if err != nil {
		return err
	}
	turns := f.threads * f.messages
	span := col.last.Sub(col.first)
	evRate := float64(col.events) / span.Seconds()
	fmt.Fprintf(a.stdout, "turns:   %d in %s (stored times; %s wall): %.0f turns/s, %d events (%.1f per turn), %.0f events/s\n",
		turns, span.Round(time.Millisecond), elapsed.Round(time.Millisecond), float64(turns)/span.Seconds(),
		col.events, float64(col.events)/float64(turns), evRate)
	var toStart, toEnd []time.Duration
	for _, t := range col.turns {
		if !t.posted.IsZero() && !t.started.IsZero() && !t.ended.IsZero() {
			toStart = append(toStart, t.started.Sub(t.posted))
			toEnd = append(toEnd, t.ended.Sub(t.posted))
		}
	}
	fmt.Fprintf(a.stdout, "latency: post -> run_started p50 %s p99 %s; post -> run end p50 %s p99 %s (messages queue behind their thread's earlier turns)\n",
		pct(toStart, 0.50), pct(toStart, 0.99), pct(toEnd, 0.50), pct(toEnd, 0.99))

	size := col.bytes / max(col.events, 1)
	rawRate, err := rawAppends(ctx, store, col.events, f.threads, size)
	if err != nil {
		return fmt.Errorf("raw appends: %w", err)
	}
	fmt.Fprintf(a.stdout, "raw:     %d plain JetStream publishes of %d bytes, %d publishers waiting for acks: %.0f appends/s\n",
		col.events, size, f.threads, rawRate)
	fmt.Fprintf(a.stdout, "ratio:   artifactr events/s / raw appends/s = %.2f (a thread appends one event at a time, each after the previous is acked and observed)\n", evRate/rawRate)
	if r := f.result; r != nil {
		r.Phases = append(r.Phases, benchPhaseJSON{Name: "concurrent", Threads: f.threads, Turns: turns,
			TurnsPerSecond: float64(turns) / span.Seconds(), Events: col.events, EventsPerSecond: evRate,
			StartP50Ms: ms(pct(toStart, 0.50)), StartP99Ms: ms(pct(toStart, 0.99)), EndP50Ms: ms(pct(toEnd, 0.50)), EndP99Ms: ms(pct(toEnd, 0.99))})
		r.RawAppendsPerSec, r.EventsPerRawRatio = rawRate, evRate/rawRate
	}
	return nil
}

// runTurns posts every message and waits until every turn has ended.
func (a *app) runTurns(ctx context.Context, store *natsstore.Store, f *benchFlags, log *slog.Logger) (*turnCollector, time.Duration, error) {
	turns := f.threads * f.messages
	col := newTurnCollector(turns)
	stop, err := followStream(ctx, store, 1, col.add)
	if err != nil {
		return nil, 0, err
	}
	defer stop()

	observer, stopObs, err := a.benchObserver(ctx, log)
	if err != nil {
		return nil, 0, err
	}
	defer stopObs()
	r, err := runner.New(runner.Config{Store: store, Agent: agent.Echo{}, ID: "bench", ClaimTTL: f.claimTTL, Logger: log, Observer: observer})
	if err != nil {
		return nil, 0, err
	}
	if err := r.Start(ctx); err != nil {
		return nil, 0, err
	}
	defer r.Kill()
	start := time.Now()
	err = parallel(ctx, f.threads, func(ctx context.Context, i int) error {
		thread := fmt.Sprintf("bench-%d", i)
		for j := range f.messages {
			m := &eventspb.MessagePosted{MessageId: fmt.Sprintf("m%d", j), Author: "bench", Text: fmt.Sprintf("message %d of %s", j, thread)}
			if _, err := store.Post(ctx, thread, m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	select {
	case <-col.done:
	case <-ctx.Done():
		col.mu.Lock()
		n := col.ended
		col.mu.Unlock()
		return nil, 0, fmt.Errorf("only %d of %d turns ended: %w", n, turns, ctx.Err())
	}
	elapsed := time.Since(start)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = r.Stop(sctx)
	col.mu.Lock()
	defer col.mu.Unlock()
	return col, elapsed, nil
}

// followStream calls fn with every event of the stream from sequence from (0:
// only new ones) in a goroutine, until the returned stop is called.
func followStream(ctx context.Context, store *natsstore.Store, from uint64, fn func(events.Envelope)) (stop func(), err error) {
	tail, err := store.Tail(ctx, events.Subjects{}.All(), from)
	if err != nil {
		return nil, err
	}
	fctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer tail.Stop()
		for {
			env, err := tail.Next(fctx)
			if err != nil {
				return
			}
			fn(env)
		}
	})
	return func() { cancel(); wg.Wait() }, nil
}

// rawAppends publishes n messages of size bytes to a stream of their own,
// from k concurrent publishers each waiting for its ack, and returns the
// rate. The stream is apart so the thread stream stays an audit log of
// events only.
func rawAppends(ctx context.Context, store *natsstore.Store, n, k, size int) (float64, error) {
	js, err := jetstream.New(store.Conn())
	if err != nil {
		return 0, err
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "BENCH_RAW", Subjects: []string{"benchraw.>"}, Storage: jetstream.FileStorage, Replicas: 1,
	}); err != nil {
		return 0, err
	}
	payload := []byte(strings.Repeat("x", max(size, 1)))
	start := time.Now()
	err = parallel(ctx, k, func(ctx context.Context, w int) error {
		count := n / k
		if w < n%k {
			count++
		}
		subj := fmt.Sprintf("benchraw.t%d.run", w)
		for range count {
			if _, err := js.Publish(ctx, subj, payload); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// parallel runs fn(0..n-1) concurrently and returns the first error; the
// first error cancels the others' ctx.
func parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, n)
	for i := range n {
		go func() {
			err := fn(ctx, i)
			if err != nil {
				cancel()
			}
			errs <- err
		}()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// pct returns the p-th percentile of ds (nearest rank).
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.5) - 1
	i = min(max(i, 0), len(s)-1)
	return s[i].Round(10 * time.Microsecond)
}
