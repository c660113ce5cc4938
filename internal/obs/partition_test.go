package obs_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/obs"
)

// partition holds every publish of one store from the first run_started
// on its thread until released, as a network partition delays them. The
// run_started's first attempt times out for its caller, so it may have
// landed; every other held publish gets its reply once released: a reply
// that comes back after its caller's claim was lost.
type partition struct {
	thread  string
	holding atomic.Bool
	first   atomic.Bool // the first held attempt was made
	release chan struct{}
	wg      sync.WaitGroup // the first attempt, delivered after the release
}

func (p *partition) wrap(next natsstore.SendFunc) natsstore.SendFunc {
	return func(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
		if !p.holding.Load() && m.Subject == "threads."+p.thread+".run" && m.Header.Get(events.HeaderType) == string(events.TypeRunStarted) {
			p.holding.Store(true)
		}
		if !p.holding.Load() {
			return next(ctx, m)
		}
		select {
		case <-p.release:
			return next(ctx, m)
		default:
		}
		if p.first.Swap(true) {
			<-p.release
			dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return next(dctx, m)
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			<-p.release
			dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _ = next(dctx, m) // its reply went to a caller that gave up
		}()
		<-ctx.Done()
		return nil, ctx.Err()
	}
}

// Issue 23, item 4: runner A's fenced run_started is held past its first
// attempt's timeout, so it may have landed; its retry is held too. A's
// session lapses, B takes the thread over, and A's actor stops, cancelling
// its context. Released, the retry is refused (10071). The refusal is
// counted as one, fenced and a refused turn, though the actor that made it
// no longer lives: the store settles it on a fresh context, not the
// cancelled one.
func TestObserver_fencedRefusalHeldPastAttemptTimeout(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	base := openStore(t, srv)
	sa, err := natsstore.New(context.Background(), natsstore.Config{URL: srv.ClientURL(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	p := &partition{thread: "h", release: make(chan struct{})}
	sa.WrapSend(p.wrap)
	defer p.wg.Wait()

	reg := prometheus.NewRegistry()
	m, err := obs.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	scrape := newScraper(t, reg, nil)
	var startCtx atomic.Pointer[context.Context]
	hook := func(ctx context.Context, ev *eventspb.Event) {
		if ev.GetThread() == "h" && events.TypeOf(ev) == events.TypeRunStarted {
			startCtx.CompareAndSwap(nil, &ctx)
		}
	}
	ttl := time.Second
	a := startRunner(t, runner.Config{
		Store: sa, ID: "A", ClaimTTL: ttl, BeforeAppend: hook,
		Observer: obs.New(obs.Config{Metrics: m, Logger: testLogger(), ErrorCode: natsstore.ErrorCode}),
	})
	defer a.Kill()
	post(t, base, "h", "contested")
	waitFor(t, "A's run_started to be held", func() error {
		if !p.holding.Load() {
			return errors.New("not yet")
		}
		return nil
	})
	b := startRunner(t, runner.Config{Store: openStore(t, srv), ID: "B", ClaimTTL: ttl})
	defer b.Kill()
	waitFor(t, "B to claim h and A's actor to stop", func() error {
		if !claimedBy(t, base, "h", "B/") {
			return errors.New("h not claimed by B")
		}
		if c := startCtx.Load(); c == nil || (*c).Err() == nil {
			return errors.New("A's actor still lives")
		}
		return nil
	})
	close(p.release)
	waitFor(t, "A's refusal counted", func() error {
		got := scrape.scrape()
		if f, r := got.get("artifactr_fenced_refusals_total"), got.get("artifactr_turns_total", "outcome", "refused"); f != 1 || r != 1 {
			return errorf("fenced_refusals_total %v, turns{refused} %v; append_errors canceled %v 10071 %v thread_busy %v", f, r,
				got.get("artifactr_append_errors_total", "code", "canceled"), got.get("artifactr_append_errors_total", "code", "10071"),
				got.get("artifactr_append_errors_total", "code", "thread_busy"))
		}
		return nil
	})
	waitFor(t, "B's turn on h", settled(t, base, "h"))
}
