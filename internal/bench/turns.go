package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
)

// TurnsConfig configures [Turns] and [ClosedLoop]: `artifactr bench
// turns`'s options.
type TurnsConfig struct {
	Threads  int           // threads to post to
	Messages int           // messages per thread
	Sync     bool          // fsync every JetStream write
	ClaimTTL time.Duration // the runner's lease TTL. Required.
	// Partitions is the store's partition count ([Turns] only). Default 1.
	Partitions int
	// Runners is how many runners share the work ([Turns] only); with
	// Partitions > 1 they divide the partitions. Default 1.
	Runners int
	// Guard is the store's guard mode ([Turns] and [ClosedLoop]), so the
	// guard's cost per turn can be measured. Default natsstore.GuardAuto.
	Guard natsstore.GuardMode
	// Fence is the store's fence layout ([Turns] and [ClosedLoop]).
	// Default natsstore.FenceClaim.
	Fence natsstore.FenceLayout
	// Out gets the text lines. Required.
	Out io.Writer
	// Logger logs the errors of the server, the stores and the runner.
	// Default discards.
	Logger *slog.Logger
	// TraceConsole gets the spans when the OTEL_* variables ask for the
	// console exporter ([Turns] only). Default discards.
	TraceConsole io.Writer
}

// fenceNote says how a store fences consuming writes.
func fenceNote(s *natsstore.Store) string {
	switch {
	case s.Subjects().RunFence:
		return "run fence layout"
	case s.Guarded():
		return "claim fence layout, guarded"
	}
	return "claim fence layout, not guarded"
}

func (c *TurnsConfig) validate() error {
	if c.Threads < 1 || c.Messages < 1 {
		return errors.New("bench: Threads and Messages must be at least 1")
	}
	if c.ClaimTTL <= 0 {
		return errors.New("bench: ClaimTTL must be positive")
	}
	if c.Partitions < 0 || c.Runners < 0 {
		return errors.New("bench: Partitions and Runners must not be negative")
	}
	c.Partitions, c.Runners = max(c.Partitions, 1), max(c.Runners, 1)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.TraceConsole == nil {
		c.TraceConsole = io.Discard
	}
	return nil
}

// TurnsResult is the figures of bench turns, as its --json prints them, in
// milliseconds and per second.
type TurnsResult struct {
	Mode              string  `json:"mode"` // "open" or "closed-loop"
	Fsync             bool    `json:"fsync"`
	Fence             string  `json:"fence"` // the store's fencing: fenceNote's words
	Phases            []Phase `json:"phases"`
	RawAppendsPerSec  float64 `json:"raw_appends_per_second,omitempty"`
	EventsPerRawRatio float64 `json:"events_per_raw_ratio,omitempty"`
	// Delivery is what the server delivered per event stored ([Turns]).
	Delivery *Delivery `json:"delivery,omitempty"`
}

// Phase is the figures of one phase of turns.
type Phase struct {
	Name            string  `json:"name"`
	Threads         int     `json:"threads"`
	Turns           int     `json:"turns"`
	TurnsPerSecond  float64 `json:"turns_per_second"`
	Events          int     `json:"events,omitempty"`
	EventsPerSecond float64 `json:"events_per_second,omitempty"`
	CPUMsPerTurn    float64 `json:"cpu_ms_per_turn,omitempty"`
	StartP50Ms      float64 `json:"start_p50_ms"`
	StartP99Ms      float64 `json:"start_p99_ms"`
	EndP50Ms        float64 `json:"end_p50_ms"`
	EndP99Ms        float64 `json:"end_p99_ms"`
}

// turnKey names a turn: its prompt's thread and sequence (sequences are
// per partition stream).
type turnKey struct {
	thread string
	seq    uint64
}

// turnTimes are the stored times of one message's turn.
type turnTimes struct {
	posted, started, ended time.Time
}

// turnCollector follows the stream and times every turn.
type turnCollector struct {
	mu        sync.Mutex // protects the fields below
	turns     map[turnKey]*turnTimes
	runPrompt map[string]turnKey // run id -> prompt
	ended     int
	events    int
	bytes     int
	first     time.Time // first post
	last      time.Time // last run end
	done      chan struct{}
	want      int
}

func newTurnCollector(want int) *turnCollector {
	return &turnCollector{turns: map[turnKey]*turnTimes{}, runPrompt: map[string]turnKey{}, done: make(chan struct{}), want: want}
}

func (c *turnCollector) turn(k turnKey) *turnTimes {
	t := c.turns[k]
	if t == nil {
		t = &turnTimes{}
		c.turns[k] = t
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
		c.turn(turnKey{env.Thread, env.Seq}).posted = env.Stored
		if c.first.IsZero() {
			c.first = env.Stored
		}
	case *eventspb.Event_RunStarted:
		k := turnKey{env.Thread, b.RunStarted.GetPromptSeq()}
		c.runPrompt[b.RunStarted.GetRunId()] = k
		c.turn(k).started = env.Stored
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
		if k, ok := c.runPrompt[id]; ok {
			c.turn(k).ended = env.Stored
			c.last = env.Stored
			c.ended++
			if c.ended == c.want {
				close(c.done)
			}
		}
	}
}

// Turns posts cfg.Messages messages to each of cfg.Threads threads all at
// once, on an embedded server with one runner and the echo agent, follows
// the stream until every turn has ended, then measures raw JetStream
// appends of the same number and size. It prints its lines to cfg.Out and
// returns one phase, "concurrent", and the raw figures.
func Turns(ctx context.Context, cfg TurnsConfig) (*TurnsResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ts, err := startTemp(ctx, "artifactr-bench-", !cfg.Sync, cfg.Partitions, cfg.Guard, cfg.Fence, cfg.Logger, nil)
	if err != nil {
		return nil, err
	}
	defer ts.Close()
	store := ts.Store
	syncNote := "not fsynced"
	if cfg.Sync {
		syncNote = "fsync on every write"
	}
	fmt.Fprintf(cfg.Out, "bench turns: %d threads x %d messages, embedded server (%s), echo agent, %d partitions, %d runners, %s\n",
		cfg.Threads, cfg.Messages, syncNote, cfg.Partitions, cfg.Runners, fenceNote(store))

	col, elapsed, dl, err := runTurns(ctx, ts, &cfg)
	if err != nil {
		return nil, err
	}
	turns := cfg.Threads * cfg.Messages
	span := col.last.Sub(col.first)
	evRate := float64(col.events) / span.Seconds()
	fmt.Fprintf(cfg.Out, "turns:   %d in %s (stored times; %s wall): %.0f turns/s, %d events (%.1f per turn), %.0f events/s\n",
		turns, span.Round(time.Millisecond), elapsed.Round(time.Millisecond), float64(turns)/span.Seconds(),
		col.events, float64(col.events)/float64(turns), evRate)
	var toStart, toEnd []time.Duration
	for _, t := range col.turns {
		if !t.posted.IsZero() && !t.started.IsZero() && !t.ended.IsZero() {
			toStart = append(toStart, t.started.Sub(t.posted))
			toEnd = append(toEnd, t.ended.Sub(t.posted))
		}
	}
	fmt.Fprintf(cfg.Out, "latency: post -> run_started p50 %s p99 %s; post -> run end p50 %s p99 %s (messages queue behind their thread's earlier turns)\n",
		pct(toStart, 0.50), pct(toStart, 0.99), pct(toEnd, 0.50), pct(toEnd, 0.99))

	size := col.bytes / max(col.events, 1)
	rawRate, err := rawAppends(ctx, store, col.events, cfg.Threads, size)
	if err != nil {
		return nil, fmt.Errorf("raw appends: %w", err)
	}
	fmt.Fprintf(cfg.Out, "raw:     %d plain JetStream publishes of %d bytes, %d publishers waiting for acks: %.0f appends/s\n",
		col.events, size, cfg.Threads, rawRate)
	fmt.Fprintf(cfg.Out, "ratio:   artifactr events/s / raw appends/s = %.2f (a thread appends one event at a time, each after the previous is acked and observed)\n", evRate/rawRate)
	fmt.Fprintf(cfg.Out, "deliver: %.2f runner deliveries per event (follows %.2f, work queue %.2f), %.2f to the bench's own follow; server out_msgs %.2f per event (with acks, API replies, lease watch)\n",
		dl.PerEvent, dl.FollowPerEvent, dl.WorkPerEvent, dl.ObserverPerEvent, dl.OutMsgsPerEvent)
	return &TurnsResult{
		Delivery: dl,
		Mode:     "open", Fsync: cfg.Sync, Fence: fenceNote(store),
		Phases: []Phase{{Name: "concurrent", Threads: cfg.Threads, Turns: turns,
			TurnsPerSecond: float64(turns) / span.Seconds(), Events: col.events, EventsPerSecond: evRate,
			StartP50Ms: ms(pct(toStart, 0.50)), StartP99Ms: ms(pct(toStart, 0.99)), EndP50Ms: ms(pct(toEnd, 0.50)), EndP99Ms: ms(pct(toEnd, 0.99))}},
		RawAppendsPerSec: rawRate, EventsPerRawRatio: evRate / rawRate,
	}, nil
}

// runTurns posts every message and waits until every turn has ended, with
// cfg.Runners runners sharing the work queue, and measures the server's
// deliveries meanwhile.
func runTurns(ctx context.Context, ts *Temp, cfg *TurnsConfig) (*turnCollector, time.Duration, *Delivery, error) {
	store := ts.Store
	turns := cfg.Threads * cfg.Messages
	col := newTurnCollector(turns)
	stop, err := followStream(ctx, store, 1, col.add)
	if err != nil {
		return nil, 0, nil, err
	}
	defer stop()
	// The bench's own follows are there before any runner's: their
	// consumers are the observer's, not delivery to runners.
	own, err := consumerDeliveries(ctx, ts)
	if err != nil {
		return nil, 0, nil, err
	}

	observer, stopObs, err := newObserver(ctx, cfg)
	if err != nil {
		return nil, 0, nil, err
	}
	defer stopObs()
	var rs []*runner.Runner
	defer func() {
		for _, r := range rs {
			r.Kill()
		}
	}()
	for i := range cfg.Runners {
		// No work queue, as before runners shared one: posts reach the
		// runners through their follows (by hash, or by partition owner).
		id := "bench"
		if cfg.Runners > 1 {
			id = fmt.Sprintf("bench-%d", i)
		}
		r, err := runner.New(runner.Config{Store: store, Agent: agent.Echo{}, ID: id, ClaimTTL: cfg.ClaimTTL, Logger: cfg.Logger, Observer: observer})
		if err != nil {
			return nil, 0, nil, err
		}
		if err := r.Start(ctx); err != nil {
			return nil, 0, nil, err
		}
		rs = append(rs, r)
	}
	if err := waitOwned(ctx, cfg.Partitions, rs); err != nil {
		return nil, 0, nil, err
	}
	before, err := readDelivery(ctx, ts)
	if err != nil {
		return nil, 0, nil, err
	}
	start := time.Now()
	err = parallel(ctx, cfg.Threads, func(ctx context.Context, i int) error {
		thread := fmt.Sprintf("bench-%d", i)
		for j := range cfg.Messages {
			m := &eventspb.MessagePosted{MessageId: fmt.Sprintf("m%d", j), Author: "bench", Text: fmt.Sprintf("message %d of %s", j, thread)}
			if _, err := store.Post(ctx, thread, m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, nil, err
	}
	select {
	case <-col.done:
	case <-ctx.Done():
		col.mu.Lock()
		n := col.ended
		col.mu.Unlock()
		return nil, 0, nil, fmt.Errorf("only %d of %d turns ended: %w", n, turns, ctx.Err())
	}
	elapsed := time.Since(start)
	after, err := readDeliveryCaughtUp(ctx, ts, cfg.Partitions, len(rs)+1)
	if err != nil {
		return nil, 0, nil, err
	}
	dl := after.since(before, own)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, r := range rs {
		_ = r.Stop(sctx)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	return col, elapsed, dl, nil
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
