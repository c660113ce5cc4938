package eventstest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections/audit"
)

// RaceConfig sizes the race test.
type RaceConfig struct {
	Threads   int // threads raced on
	PerThread int // goroutines per thread
	Rounds    int // takeover rounds per goroutine
}

// DefaultRace is 16 goroutines over 4 threads.
var DefaultRace = RaceConfig{Threads: 4, PerThread: 4, Rounds: 6}

// RaceResult is what a race run did.
type RaceResult struct {
	Report  audit.Report
	Landed  int // consuming appends that landed
	Refused int // consuming appends the fence refused
	// Safety counts the report's I1 and I3 violations: what the fence
	// exists to prevent. Other checks (FenceNewestClaim) flag an unfenced
	// append by its headers alone, so they fail the control run whether or
	// not the race broke safety; counting them would let the control pass
	// for the wrong reason.
	Safety int
}

// safetyViolations counts r's violations of I1 and I3.
func safetyViolations(r audit.Report) int {
	n := 0
	for _, v := range r.Violations {
		if v.Check == audit.CheckI1 || v.Check == audit.CheckI3 {
			n++
		}
	}
	return n
}

// RunRace races takeovers and consuming appends: in every round, each of a
// thread's goroutines claims it (stealing the lease through a clock that
// jumps past the TTL), plans the oldest untaken message, and then all of them
// append run_started and run_completed at once. Every claim but the last of
// a round is stale when it writes. The log is then replayed through the
// audit, which checks every consuming event against the claim that was
// newest at its position.
//
// open must return handles on one shared log; wrap them with Unfenced for
// the control run.
func RunRace(t *testing.T, open func(now func() time.Time) events.Store, cfg RaceConfig) RaceResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex // protects res
	var res RaceResult
	threads := make([]string, cfg.Threads)
	var wg sync.WaitGroup
	for i := range threads {
		threads[i] = NewThread(t)
		th := threads[i]
		s := open(time.Now)
		for m := range cfg.Rounds * cfg.PerThread {
			if _, err := s.Post(ctx, th, &eventspb.MessagePosted{MessageId: fmt.Sprint(m), Text: "m"}); err != nil {
				t.Fatal(err)
			}
		}
		clock := NewClock(0) // shared by the thread's goroutines
		claimed := newBarrier(cfg.PerThread)
		wrote := newBarrier(cfg.PerThread)
		for g := range cfg.PerThread {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := open(clock.Now)
				holder := fmt.Sprintf("g%d", g)
				for round := range cfg.Rounds {
					c, envs, err := stealClaim(ctx, s, clock, th, holder)
					if err != nil {
						t.Errorf("%s round %d: %v", holder, round, err)
						return
					}
					m, ok := oldestUntaken(envs)
					claimed.wait()
					if ok {
						landed, err := startAndEnd(ctx, s, c, m, fmt.Sprintf("%s-r%d", holder, round))
						mu.Lock()
						switch {
						case err == nil && landed:
							res.Landed++
						case errors.Is(err, events.ErrThreadBusy):
							res.Refused++
						case err != nil:
							t.Errorf("%s round %d: %v", holder, round, err)
						}
						mu.Unlock()
					}
					wrote.wait()
				}
			}()
		}
	}
	wg.Wait()
	s := open(time.Now)
	// Every violation, to count them, on the store's subjects: the fence
	// names the thread's partition's claim subject.
	a := audit.NewWithOptions(audit.Options{MaxFindings: -1, Subjects: s.Subjects()})
	for _, th := range threads {
		envs, err := s.Load(ctx, th, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range envs {
			a.Add(e)
		}
	}
	res.Report = a.Report()
	res.Safety = safetyViolations(res.Report)
	return res
}

// stealClaim claims th, moving the shared clock past the TTL first so that
// any live lease has lapsed. Losing the lease race to a sibling just retries.
func stealClaim(ctx context.Context, s events.ClaimStore, clock *Clock, th, holder string) (events.Claim, []events.Envelope, error) {
	for {
		clock.Advance(2 * TTL)
		c, envs, err := events.AcquireClaim(ctx, s, th, holder, TTL, clock.Now())
		if errors.Is(err, events.ErrThreadBusy) {
			continue
		}
		return c, envs, err
	}
}

func startAndEnd(ctx context.Context, s events.Appender, c events.Claim, m uint64, run string) (bool, error) {
	ack, err := s.Append(ctx, events.NewRunStarted(c, time.Now(), run, m, "race"), events.Fenced(c))
	if err != nil {
		return false, err
	}
	_, err = s.Append(ctx, events.NewRunCompleted(c, time.Now(), run, "ok"), events.ExpectLast(ack.Seq))
	if errors.Is(err, events.ErrConflict) {
		// A sibling's write moved the run subject; the start stands.
		err = nil
	}
	return true, err
}

// barrier is a reusable rendezvous of n goroutines.
type barrier struct {
	mu    sync.Mutex
	n     int
	count int
	gen   chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, gen: make(chan struct{})} }

func (b *barrier) wait() {
	b.mu.Lock()
	gen := b.gen
	b.count++
	if b.count == b.n {
		b.count = 0
		b.gen = make(chan struct{})
		close(gen)
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	<-gen
}
