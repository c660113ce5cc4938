package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
)

// closedLoop is the chat shape: each thread posts its next message only
// after the run of its previous one has ended.
type closedLoop struct {
	mu      sync.Mutex // protects the fields below
	waiting map[uint64]chan turnTimes
	turns   map[uint64]*turnTimes
	prompt  map[string]uint64 // run id -> prompt seq
}

func newClosedLoop() *closedLoop {
	return &closedLoop{waiting: map[uint64]chan turnTimes{}, turns: map[uint64]*turnTimes{}, prompt: map[string]uint64{}}
}

func (c *closedLoop) add(env events.Envelope) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var id string
	switch b := env.Event.GetBody().(type) {
	case *eventspb.Event_MessagePosted:
		c.turn(env.Seq).posted = env.Stored
		return
	case *eventspb.Event_RunStarted:
		c.prompt[b.RunStarted.GetRunId()] = b.RunStarted.GetPromptSeq()
		c.turn(b.RunStarted.GetPromptSeq()).started = env.Stored
		return
	case *eventspb.Event_RunCompleted:
		id = b.RunCompleted.GetRunId()
	case *eventspb.Event_RunFailed:
		id = b.RunFailed.GetRunId()
	case *eventspb.Event_RunAbandoned:
		id = b.RunAbandoned.GetRunId()
	default:
		return
	}
	seq, ok := c.prompt[id]
	if !ok {
		return
	}
	t := c.turn(seq)
	t.ended = env.Stored
	delete(c.prompt, id)
	if ch := c.waiting[seq]; ch != nil {
		ch <- *t
		delete(c.waiting, seq)
		delete(c.turns, seq)
	} // else kept for wait, which came late
}

func (c *closedLoop) turn(seq uint64) *turnTimes {
	t := c.turns[seq]
	if t == nil {
		t = &turnTimes{}
		c.turns[seq] = t
	}
	return t
}

// wait returns a channel that receives the times of seq's turn once its run
// ended; the caller registers before the end can be seen, or it is missed.
func (c *closedLoop) wait(seq uint64) chan turnTimes {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan turnTimes, 1)
	if t := c.turns[seq]; t != nil && !t.ended.IsZero() {
		ch <- *t
		delete(c.turns, seq)
		return ch
	}
	c.waiting[seq] = ch
	return ch
}

// ClosedLoop runs the chat shape on an embedded server with one runner and
// the echo agent: each thread posts its next message once its last run
// ended. Its phases are cfg.Threads x cfg.Messages ("concurrent"), then one
// thread with 200 turns in sequence ("sequential"). It prints its lines to
// cfg.Out.
func ClosedLoop(ctx context.Context, cfg TurnsConfig) (*TurnsResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ts, err := startTemp(ctx, "artifactr-bench-", !cfg.Sync, 1, cfg.Guard, cfg.Fence, cfg.Logger, nil)
	if err != nil {
		return nil, err
	}
	defer ts.Close()
	r, err := runner.New(runner.Config{Store: ts.Store, Agent: agent.Echo{}, ID: "bench", ClaimTTL: cfg.ClaimTTL, IdleTimeout: time.Hour, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	if err := r.Start(ctx); err != nil {
		return nil, err
	}
	defer r.Kill()
	syncNote := "not fsynced"
	if cfg.Sync {
		syncNote = "fsync on every write"
	}
	fmt.Fprintf(cfg.Out, "bench turns --closed-loop: embedded server (%s), one runner, echo agent, %s; each thread posts its next message when its last run ended\n", syncNote, fenceNote(ts.Store))
	phases := []struct {
		name              string
		threads, messages int
	}{
		{"concurrent", cfg.Threads, cfg.Messages},
		{"sequential", 1, 200},
	}
	clients, err := ts.Client(ctx, cfg.Logger)
	if err != nil {
		return nil, err
	}
	defer clients.Close()
	res := &TurnsResult{Mode: "closed-loop", Fsync: cfg.Sync, Fence: fenceNote(ts.Store), Phases: []Phase{}}
	for i, p := range phases {
		ph, err := closedPhase(ctx, cfg.Out, clients, p.name, fmt.Sprintf("cl%d", i), p.threads, p.messages)
		if err != nil {
			return nil, err
		}
		res.Phases = append(res.Phases, ph)
	}
	return res, nil
}

// closedPhase runs one closed-loop phase of threads x messages turns,
// posting over NATS through store, and prints its lines to out.
func closedPhase(ctx context.Context, out io.Writer, store *natsstore.Store, name, prefix string, threads, messages int) (Phase, error) {
	col := newClosedLoop()
	stop, err := followStream(ctx, store, 0, col.add)
	if err != nil {
		return Phase{}, err
	}
	defer stop()

	var mu sync.Mutex
	var toStart, toEnd []time.Duration
	cpu0, start := cpuTime(), time.Now()
	err = parallel(ctx, threads, func(ctx context.Context, i int) error {
		thread := fmt.Sprintf("%s-%d", prefix, i)
		for j := range messages {
			m := &eventspb.MessagePosted{MessageId: fmt.Sprintf("m%d", j), Author: "bench", Text: fmt.Sprintf("message %d of %s", j, thread)}
			ack, err := store.Post(ctx, thread, m)
			if err != nil {
				return err
			}
			select {
			case t := <-col.wait(ack.Seq):
				mu.Lock()
				toStart = append(toStart, t.started.Sub(t.posted))
				toEnd = append(toEnd, t.ended.Sub(t.posted))
				mu.Unlock()
			case <-ctx.Done():
				return fmt.Errorf("waiting for the run of %s seq %d: %w", thread, ack.Seq, ctx.Err())
			}
		}
		return nil
	})
	if err != nil {
		return Phase{}, err
	}
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	turns := threads * messages
	fmt.Fprintf(out, "%s: %d threads x %d turns: %.0f turns/s (%s wall), CPU %.2f ms per turn\n",
		name, threads, messages, float64(turns)/elapsed.Seconds(), elapsed.Round(time.Millisecond), float64(cpu.Microseconds())/1000/float64(turns))
	fmt.Fprintf(out, "  latency: post -> run_started p50 %s p99 %s; post -> run end p50 %s p99 %s\n",
		pct(toStart, 0.50), pct(toStart, 0.99), pct(toEnd, 0.50), pct(toEnd, 0.99))
	return Phase{Name: name, Threads: threads, Turns: turns, TurnsPerSecond: float64(turns) / elapsed.Seconds(),
		CPUMsPerTurn: float64(cpu.Microseconds()) / 1000 / float64(turns),
		StartP50Ms:   ms(pct(toStart, 0.50)), StartP99Ms: ms(pct(toStart, 0.99)), EndP50Ms: ms(pct(toEnd, 0.50)), EndP99Ms: ms(pct(toEnd, 0.99))}, nil
}
