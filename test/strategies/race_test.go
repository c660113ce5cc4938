package strategies_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/doubletext"
	"github.com/artifactr/artifactr/projections"
)

// jitterAgent is the echo agent with a delay drawn from its prompt and the
// seed, 0 to 15 ms, so that runs start and end while posts race them. It
// honours its context.
type jitterAgent struct {
	seed  uint64
	steer bool
}

func (jitterAgent) Name() string      { return "jitter" }
func (j jitterAgent) Steerable() bool { return j.steer }

func (j jitterAgent) Run(ctx context.Context, t agent.Turn) (string, error) {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%d/%s", j.seed, t.Prompt().Text)
	e := agent.Echo{Delay: time.Duration(h.Sum64()%16) * time.Millisecond, Steer: j.steer}
	return e.Run(ctx, t)
}

// raceSeeds are the seeds the race tests run; ARTIFACTR_SEED runs one.
func raceSeeds(t *testing.T) []uint64 {
	if v := os.Getenv("ARTIFACTR_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("ARTIFACTR_SEED %q: %v", v, err)
		}
		return []uint64{n}
	}
	return []uint64{1, 2, 3}
}

// Each strategy under races: several posters post to a thread configured
// with the strategy (some posts name another strategy, some are cancel
// requests) while runs start and end. Every post either lands or, under
// reject, is refused as busy; in the end every message is consumed, and the
// log keeps I1 and I3, audits clean (RejectOnlyIdle included), conforms to
// the spec, and every run cancelled or interrupted ended so.
func TestStrategies_races(t *testing.T) {
	for _, k := range kinds {
		for _, st := range events.Strategies {
			for _, seed := range raceSeeds(t) {
				t.Run(fmt.Sprintf("%s/%s/seed=%d", k, st, seed), func(t *testing.T) {
					t.Logf("seed %d (rerun with ARTIFACTR_SEED=%d)", seed, seed)
					raceOne(t, k, st, seed)
				})
			}
		}
	}
}

func raceOne(t *testing.T, k storeKind, st events.Strategy, seed uint64) {
	s := newStore(t, k)
	rng := rand.New(rand.NewPCG(seed, uint64(len(st))))
	startRunner(t, s, jitterAgent{seed: seed, steer: rng.IntN(2) == 0})
	th := fmt.Sprintf("race-%s-%d", st, seed)
	if _, err := doubletext.Configure(t.Context(), s, th, st, time.Now()); err != nil {
		t.Fatal(err)
	}
	const posters, perPoster = 3, 12
	// busy counts refusals of posts of the thread's strategy, busyOwn those
	// of posts that named reject themselves.
	var accepted, busy, busyOwn, cancels atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, posters)
	for p := range posters {
		prng := rand.New(rand.NewPCG(seed, uint64(p)+100))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perPoster {
				// Jitter, not a wait: it spreads posts over runs' starts and ends.
				time.Sleep(time.Duration(prng.IntN(8)) * time.Millisecond)
				switch x := prng.IntN(10); {
				case x == 0:
					if _, err := doubletext.Cancel(context.Background(), s, th, "", "", time.Now()); err != nil {
						errc <- err
						return
					}
					cancels.Add(1)
					continue
				case x == 1:
					st := events.Strategies[prng.IntN(len(events.Strategies))]
					_, err := post(context.Background(), s, th, fmt.Sprintf("p%d-%d-%s", p, i, st), st)
					if countPost(err, &accepted, &busyOwn, errc) {
						return
					}
					continue
				}
				_, err := post(context.Background(), s, th, fmt.Sprintf("p%d-%d", p, i), "")
				if countPost(err, &accepted, &busy, errc) {
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	v := settled(t, s, th)
	if int64(len(v.Messages)) != accepted.Load() {
		t.Errorf("%d messages stored, %d posts accepted", len(v.Messages), accepted.Load())
	}
	if st != events.StrategyReject && busy.Load() > 0 {
		t.Errorf("%d posts refused as busy under %s", busy.Load(), st)
	}
	var interrupted, cancelled, rolled int
	for _, r := range v.Runs {
		switch {
		case r.Status == projections.RunCompleted:
		case r.Status == projections.RunFailed && r.Reason == events.ReasonInterrupted && r.InterruptSeq != 0:
			interrupted++
		case r.Status == projections.RunFailed && r.Reason == events.ReasonCancelled && r.CancelSeq != 0:
			cancelled++
		default:
			t.Errorf("run %s ended %s %q (interrupt %d, cancel %d)", r.ID, r.Status, r.Reason, r.InterruptSeq, r.CancelSeq)
		}
		if r.RolledBack {
			rolled++
		}
	}
	t.Logf("%s: %d posts accepted, %d refused busy (and %d posts naming reject), %d cancel requests; %d runs: %d interrupted, %d rolled back (some completed first), %d cancelled",
		st, accepted.Load(), busy.Load(), busyOwn.Load(), cancels.Load(), len(v.Runs), interrupted, rolled, cancelled)
	checkLog(t, s, th)
}

// countPost counts a post's outcome; it reports true when the poster must
// stop on an unexpected error.
func countPost(err error, accepted, busy *atomic.Int64, errc chan<- error) bool {
	switch {
	case err == nil:
		accepted.Add(1)
	case errors.Is(err, events.ErrThreadBusy):
		busy.Add(1)
	default:
		errc <- err
		return true
	}
	return false
}
