package obs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/obs"
)

// pausable is a runner's store that can pause its holder, as a process that
// stopped (GC, SIGSTOP, a descheduled VM) would be: while paused its tails
// deliver nothing and its lease renewals wait, so it neither sees a newer
// claim nor keeps its lease. The pause ends when the next append returns.
type pausable struct {
	events.Store

	mu     sync.Mutex    // protects paused
	paused chan struct{} // closed when the pause ends; nil when not paused
}

func (p *pausable) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused == nil {
		p.paused = make(chan struct{})
	}
}

func (p *pausable) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused != nil {
		close(p.paused)
		p.paused = nil
	}
}

// wait blocks while paused.
func (p *pausable) wait(ctx context.Context) error {
	p.mu.Lock()
	ch := p.paused
	p.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pausable) Append(ctx context.Context, ev *eventspb.Event, chk events.Check, opts ...events.AppendOption) (events.Ack, error) {
	ack, err := p.Store.Append(ctx, ev, chk, opts...)
	p.resume()
	return ack, err
}

func (p *pausable) RenewSession(ctx context.Context, s events.Session) (events.Session, error) {
	if err := p.wait(ctx); err != nil {
		return events.Session{}, err
	}
	return p.Store.RenewSession(ctx, s)
}

func (p *pausable) Tail(ctx context.Context, filter string, from uint64) (events.Tail, error) {
	t, err := p.Store.Tail(ctx, filter, from)
	return pausedTail{t, p}, err
}

type pausedTail struct {
	events.Tail
	p *pausable
}

func (t pausedTail) Next(ctx context.Context) (events.Envelope, error) {
	env, err := t.Tail.Next(ctx)
	if werr := t.p.wait(ctx); werr != nil {
		return events.Envelope{}, werr
	}
	return env, err
}

func openStore(t *testing.T, srv *natsembed.Server) *natsstore.Store {
	t.Helper()
	s, err := natsstore.New(context.Background(), natsstore.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// claimedBy reports whether th's newest claim marker is held by holder
// prefix.
func claimedBy(t *testing.T, s events.Reader, th, prefix string) bool {
	v := fold(t, s, th)
	return v.Claim.Seq != 0 && strings.HasPrefix(v.Claim.Holder, prefix)
}

// Runner A completes turns and fails one; then, paused before a run_started,
// it loses the thread to runner B and its stale run_started is refused by
// the fence (10071). Each counter and histogram moves as the README says,
// on a real server, scraped over HTTP.
func TestObserver_metricsScraped(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	base := openStore(t, srv)
	pa := &pausable{Store: base}
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	mA, err := obs.NewMetrics(regA)
	if err != nil {
		t.Fatal(err)
	}
	mB, err := obs.NewMetrics(regB)
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	scrapeA, scrapeB := newScraper(t, regA, nil), newScraper(t, regB, nil)

	// A stalls its run_started on thread "f", paused, until B holds "f".
	stalled := make(chan struct{})
	hook := func(ctx context.Context, ev *eventspb.Event) {
		if ev.GetThread() != "f" || events.TypeOf(ev) != events.TypeRunStarted {
			return
		}
		pa.pause()
		close(stalled)
		waitFor(t, "B to claim f", func() error {
			if !claimedBy(t, base, "f", "B/") {
				return errors.New("f not claimed by B")
			}
			return nil
		})
	}
	ttl := time.Second // natsstore leases have whole seconds
	a := startRunner(t, runner.Config{
		Store: pa, ID: "A", ClaimTTL: ttl, BeforeAppend: hook, IdleTimeout: time.Second,
		Observer: obs.New(obs.Config{Metrics: mA, TracerProvider: tp, Logger: testLogger(), ErrorCode: natsstore.ErrorCode}),
	})
	defer a.Kill()

	post(t, base, "a", "one")
	post(t, base, "a", "fail: on purpose")
	post(t, base, "a", "three")
	waitFor(t, "A's three turns", settled(t, base, "a"))
	waitFor(t, "the counters of three turns", func() error {
		m := scrapeA.scrape()
		if m.get("artifactr_turns_total", "outcome", "completed") != 2 || m.get("artifactr_turns_total", "outcome", "failed") != 1 {
			return errorf("completed %v failed %v", m.get("artifactr_turns_total", "outcome", "completed"), m.get("artifactr_turns_total", "outcome", "failed"))
		}
		return nil
	})
	m := scrapeA.scrape()
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"artifactr_turns_total", []string{"outcome", "abandoned"}, 0},
		{"artifactr_turns_total", []string{"outcome", "refused"}, 0},
		{"artifactr_run_start_latency_seconds", nil, 3},
		{"artifactr_turn_duration_seconds", nil, 3},
		{"artifactr_claims_total", nil, 1},
		{"artifactr_takeovers_total", nil, 0},
		{"artifactr_fenced_refusals_total", nil, 0},
	} {
		if got := m.get(c.name, c.labels...); got != c.want {
			t.Errorf("after three turns: %s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	waitFor(t, "a lease renewal", func() error {
		if n := scrapeA.scrape().get("artifactr_lease_renewals_total"); n < 1 {
			return errorf("%v renewals", n)
		}
		return nil
	})
	// A gives "a" up after its idle timeout, so that below it holds "f"
	// alone when its session lapses.
	waitFor(t, "A to release a", func() error {
		if n := scrapeA.scrape().get("artifactr_claimed_threads"); n != 0 {
			return errorf("%v claimed threads", n)
		}
		return nil
	})

	// The refused start: A claims "f", stalls paused before run_started;
	// its session lapses, B takes "f" over and runs the turn itself.
	post(t, base, "f", "contested")
	<-stalled
	b := startRunner(t, runner.Config{
		Store: openStore(t, srv), ID: "B", ClaimTTL: ttl,
		Observer: obs.New(obs.Config{Metrics: mB, Logger: testLogger(), ErrorCode: natsstore.ErrorCode}),
	})
	defer b.Kill()
	waitFor(t, "A's refused start counted", func() error {
		if n := scrapeA.scrape().get("artifactr_turns_total", "outcome", "refused"); n != 1 {
			return errorf("%v refused", n)
		}
		return nil
	})
	waitFor(t, "B's turn on f", settled(t, base, "f"))
	m = scrapeA.scrape()
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"artifactr_fenced_refusals_total", nil, 1},
		{"artifactr_append_errors_total", []string{"code", "10071"}, 1},
		{"artifactr_turns_total", []string{"outcome", "completed"}, 2},
		{"artifactr_run_start_latency_seconds", nil, 3}, // the refused start never started
		{"artifactr_turn_duration_seconds", nil, 4},     // a refused start is a failed turn
		{"artifactr_claims_total", nil, 2},
	} {
		if got := m.get(c.name, c.labels...); got != c.want {
			t.Errorf("after the refused start: %s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	waitFor(t, "B's counters", func() error {
		m := scrapeB.scrape()
		if m.get("artifactr_turns_total", "outcome", "completed") != 1 || m.get("artifactr_takeovers_total") != 1 || m.get("artifactr_claims_total") != 1 {
			return errorf("B: completed %v takeovers %v claims %v", m.get("artifactr_turns_total", "outcome", "completed"),
				m.get("artifactr_takeovers_total"), m.get("artifactr_claims_total"))
		}
		return nil
	})

	// The refused start is a failed turn span too (ADR-0069).
	var refused int
	for _, s := range spansNamed(rec, "turn") {
		if attr(s, obs.AttrOutcome).AsString() == obs.OutcomeRefused {
			refused++
			if s.Status().Code != codes.Error || attr(s, obs.AttrThread).AsString() != "f" {
				t.Errorf("refused turn span: status %v thread %q", s.Status(), attr(s, obs.AttrThread).AsString())
			}
		}
	}
	if refused != 1 {
		t.Errorf("%d refused turn spans, want 1", refused)
	}

	// Stopping releases every claim: the gauge returns to zero.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := scrapeA.scrape().get("artifactr_claimed_threads"); got != 0 {
		t.Errorf("claimed_threads after Stop = %v, want 0", got)
	}
}
