package runner_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/internal/testkit"
)

// waitPeers waits until every runner's lease watch knows of all of them, so
// that they agree on which runner each free thread falls to.
func waitPeers(t *testing.T, rs ...*runner.Runner) {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, "runners see each other's sessions", func() (bool, string) {
		for i, r := range rs {
			if n := r.Stats().LiveSessions; n != int64(len(rs)) {
				return false, fmt.Sprintf("runner %d sees %d sessions", i, n)
			}
		}
		return true, ""
	})
}

func threadNames(n int) []string {
	ths := make([]string, n)
	for i := range ths {
		ths[i] = fmt.Sprintf("h%d", i)
	}
	return ths
}

// A post to a free thread is claimed by one runner, not raced for by all:
// the others look again later and, finding it held, leave it.
func TestRunner_onePostOneClaim(t *testing.T) {
	log := memstore.NewLog()
	const n = 60
	// Long enough that a loaded machine renews every session in time: a
	// session that seems to lapse moves threads to other runners, whose
	// claims are then rightly refused as busy.
	ttl := time.Second
	var rs []*runner.Runner
	for i := range 3 {
		r := startRunner(t, runner.Config{Store: log.Open(memstore.Config{}), ID: fmt.Sprintf("R%d", i), ClaimTTL: ttl, IdleTimeout: time.Hour})
		defer r.Stop(context.Background())
		rs = append(rs, r)
	}
	waitPeers(t, rs...)
	s := log.Open(memstore.Config{})
	ths := threadNames(n)
	var last uint64
	for _, th := range ths {
		last = post(t, s, th, "hello")
	}
	testkit.WaitFor(t, 20*time.Second, "every post answered", settled(t, s, ths...))
	// The runners a thread did not fall to look at it again later (unless
	// they saw its lease first); wait until every runner has routed every
	// post, then until all those looks are done.
	for _, r := range rs {
		testkit.WaitFor(t, 20*time.Second, "the follow routes every post", func() (bool, string) {
			return r.Followed() >= last, fmt.Sprintf("followed %d of %d", r.Followed(), last)
		})
		r.Describe(context.Background(), nil) // through the actor's mailbox: it has taken the posts
	}
	testkit.WaitFor(t, 20*time.Second, "the other runners' looks again", func() (bool, string) {
		var due int64
		for _, r := range rs {
			due += r.Stats().RechecksDue
		}
		return due == 0, fmt.Sprintf("%d due", due)
	})
	var claims, busy int64
	lapsed := false
	for i, r := range rs {
		st := r.Stats()
		t.Logf("runner %d: %+v", i, st)
		claims += st.Claims
		busy += st.ClaimsBusy
		lapsed = lapsed || st.Sessions != 1
	}
	switch {
	case lapsed:
		// A renewal came later than the TTL (a machine far busier than
		// its cores): the lapsed session's threads rightly went to the
		// other runners, so the count below does not apply. The runs and
		// the audit still must.
		t.Logf("a session lapsed; %d claims and %d refused as busy", claims, busy)
	case claims != n || busy != 0:
		t.Fatalf("%d posts to free threads made %d claims and %d refused as busy; want %d and 0", n, claims, busy, n)
	}
	for _, th := range ths {
		if got := len(fold(t, s, th).Runs); got != 1 {
			t.Fatalf("%s: %d runs, want 1", th, got)
		}
	}
	auditClean(t, s, ths...)
}

// stuckClaims never gets a lease: its runner sees posts but cannot claim.
type stuckClaims struct{ *memstore.Store }

func (s stuckClaims) AcquireSessionLease(ctx context.Context, _, _ string, _ events.Session) (events.Lease, error) {
	<-ctx.Done()
	return events.Lease{}, ctx.Err()
}

// A post that falls to a runner that cannot claim it, and then dies, is
// not lost: another runner looks at the thread again, reads that it has
// work, and claims it. No lease was ever written, so the lapse of the dead
// runner's session says nothing about these threads.
func TestRunner_postOfDeadRunnerNotLost(t *testing.T) {
	log := memstore.NewLog()
	const n = 40
	ttl := 300 * time.Millisecond
	a := startRunner(t, runner.Config{Store: log.Open(memstore.Config{}), ID: "A", ClaimTTL: ttl, IdleTimeout: time.Hour})
	defer a.Stop(context.Background())
	b := startRunner(t, runner.Config{Store: stuckClaims{log.Open(memstore.Config{})}, ID: "B", ClaimTTL: ttl, IdleTimeout: time.Hour, CallTimeout: time.Hour})
	waitPeers(t, a, b)
	s := log.Open(memstore.Config{})
	ths := threadNames(n)
	for _, th := range ths {
		post(t, s, th, "hello")
	}
	b.Kill()
	testkit.WaitFor(t, 20*time.Second, "every post answered", settled(t, s, ths...))
	st := a.Stats()
	t.Logf("A: %+v", st)
	if st.Claims != n {
		t.Fatalf("A claimed %d threads, want %d", st.Claims, n)
	}
	if st.Peeks == 0 {
		t.Fatalf("A answered B's share without a look again: the test did not reach the path it is for")
	}
	auditClean(t, s, ths...)
}

// A look again at a released thread with nothing to do only reads it: it
// neither claims it nor writes, so looking again cannot turn into a loop
// of claims and releases that grows the log. Here B left the second posts
// of A's threads to A; when A's stop releases them, B reads each and finds
// nothing to do.
func TestRunner_lookAgainOnlyReads(t *testing.T) {
	log := memstore.NewLog()
	const n = 20
	ttl := 300 * time.Millisecond
	a := startRunner(t, runner.Config{Store: log.Open(memstore.Config{}), ID: "A", ClaimTTL: ttl, IdleTimeout: time.Hour})
	b := startRunner(t, runner.Config{Store: log.Open(memstore.Config{}), ID: "B", ClaimTTL: ttl, IdleTimeout: time.Hour})
	defer b.Stop(context.Background())
	waitPeers(t, a, b)
	s := log.Open(memstore.Config{})
	ths := threadNames(n)
	for _, th := range ths {
		post(t, s, th, "one")
	}
	testkit.WaitFor(t, 20*time.Second, "first posts answered", settled(t, s, ths...))
	testkit.WaitFor(t, 20*time.Second, "threads held", func() (bool, string) {
		return a.Stats().Held+b.Stats().Held == n, fmt.Sprintf("A %d, B %d", a.Stats().Held, b.Stats().Held)
	})
	for _, th := range ths {
		post(t, s, th, "two")
	}
	testkit.WaitFor(t, 20*time.Second, "second posts answered", settled(t, s, ths...))
	held := a.Stats().Held
	if held == 0 || held == n {
		t.Fatalf("A holds %d of %d threads; the test needs both runners to hold some", held, n)
	}
	bClaims := b.Stats().Claims
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "B reads A's released threads", func() (bool, string) {
		st := b.Stats()
		return st.Peeks >= held && st.RechecksDue == 0, fmt.Sprintf("%+v", st)
	})
	for th, d := range b.Describe(context.Background(), ths) {
		if strings.Contains(d, "queued(") || strings.Contains(d, "claiming(") {
			t.Fatalf("B is about to claim %s with nothing to do: %s", th, d)
		}
	}
	if st := b.Stats(); st.Claims != bClaims {
		t.Fatalf("B claimed %d threads after A's release, want 0: %+v", st.Claims-bClaims, st)
	}
	for _, th := range ths {
		envs, err := s.Load(context.Background(), th, 1)
		if err != nil {
			t.Fatal(err)
		}
		claims := 0
		for _, e := range envs {
			if e.Type == events.TypeThreadClaimed {
				claims++
			}
		}
		if claims != 1 {
			t.Fatalf("%s: %d thread_claimed events, want 1", th, claims)
		}
	}
}

// chanWork is a work source fed by the test, recording acknowledgements.
type chanWork struct {
	wake  chan string
	acked atomic.Int64
}

func (w *chanWork) Next(ctx context.Context) (string, func(), error) {
	select {
	case th := <-w.wake:
		return th, func() { w.acked.Add(1) }, nil
	case <-ctx.Done():
		return "", nil, ctx.Err()
	}
}

func (w *chanWork) Stop() {}

// A wake-up from the work source is acknowledged once a claim holds its
// thread, never before: a runner that cannot claim leaves it unacknowledged,
// for the source to hand to another runner.
func TestRunner_workAckedAfterClaim(t *testing.T) {
	log := memstore.NewLog()
	s := log.Open(memstore.Config{})
	ttl := 300 * time.Millisecond
	stuck := &chanWork{wake: make(chan string, 1)}
	b := startRunner(t, runner.Config{Store: stuckClaims{log.Open(memstore.Config{})}, ID: "B", ClaimTTL: ttl, CallTimeout: 50 * time.Millisecond, Work: stuck})
	post(t, s, "w", "hello")
	stuck.wake <- "w"
	testkit.WaitFor(t, 20*time.Second, "B's claims fail", func() (bool, string) {
		d := b.Describe(context.Background(), []string{"w"})["w"]
		return strings.Contains(d, "failures=2"), d
	})
	if n := stuck.acked.Load(); n != 0 {
		t.Fatalf("B acknowledged the wake-up %d times without a claim", n)
	}
	b.Kill()

	work := &chanWork{wake: make(chan string, 1)}
	a := startRunner(t, runner.Config{Store: log.Open(memstore.Config{}), ID: "A", ClaimTTL: ttl, Work: work})
	defer a.Stop(context.Background())
	work.wake <- "w" // redelivered
	testkit.WaitFor(t, 20*time.Second, "A answers and acknowledges", func() (bool, string) {
		ok, state := settled(t, s, "w")()
		return ok && work.acked.Load() == 1, fmt.Sprintf("%s; acked %d", state, work.acked.Load())
	})
	auditClean(t, s, "w")
}

// A wake-up for a thread another runner holds stays unacknowledged while
// that claim lasts (its holder may release it and die before it claims
// again for the post); once it is released, a read finds nothing left to
// do, and only then is the wake-up acknowledged, with no claim.
func TestRunner_workParkedWhileHeldElsewhere(t *testing.T) {
	log := memstore.NewLog()
	s := log.Open(memstore.Config{})
	ttl := 300 * time.Millisecond
	a := startRunner(t, runner.Config{Store: log.Open(memstore.Config{}), ID: "A", ClaimTTL: ttl, IdleTimeout: time.Hour})
	post(t, s, "w", "one")
	testkit.WaitFor(t, 20*time.Second, "A answers", settled(t, s, "w"))
	work := &chanWork{wake: make(chan string, 1)}
	b := startRunner(t, runner.Config{Store: log.Open(memstore.Config{}), ID: "B", ClaimTTL: ttl, IdleTimeout: time.Hour, Work: work})
	defer b.Stop(context.Background())
	waitPeers(t, a, b)
	post(t, s, "w", "two")
	work.wake <- "w"
	testkit.WaitFor(t, 20*time.Second, "B parks the wake-up", func() (bool, string) {
		d := b.Describe(context.Background(), []string{"w"})["w"]
		return strings.Contains(d, "parked=1"), d
	})
	testkit.WaitFor(t, 20*time.Second, "A answers the second post", settled(t, s, "w"))
	if n := work.acked.Load(); n != 0 {
		t.Fatalf("B acknowledged the wake-up while A held the thread")
	}
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "B reads the released thread and acknowledges", func() (bool, string) {
		return work.acked.Load() == 1, fmt.Sprintf("acked %d; %+v", work.acked.Load(), b.Stats())
	})
	if st := b.Stats(); st.Claims != 0 || st.Peeks == 0 {
		t.Fatalf("B: %+v; want no claim, and a read", st)
	}
}

// releasingWork is a chanWork that can hand back what it gave out.
type releasingWork struct {
	chanWork
	released atomic.Int64
}

func (w *releasingWork) Release() { w.released.Add(1) }

// A graceful Stop hands the work source's unacknowledged wake-ups back
// (WorkReleaser), so the other runners get them at once; Kill, as a
// crash, does not.
func TestRunner_stopReleasesWakeUps(t *testing.T) {
	log := memstore.NewLog()
	for _, stop := range []string{"Stop", "Kill"} {
		w := &releasingWork{chanWork: chanWork{wake: make(chan string, 1)}}
		r := startRunner(t, runner.Config{Store: log.Open(memstore.Config{}), ID: stop, Work: w})
		if stop == "Stop" {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			if err := r.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			cancel()
		} else {
			r.Kill()
		}
		want := int64(0)
		if stop == "Stop" {
			want = 1
		}
		if got := w.released.Load(); got != want {
			t.Errorf("after %s: Release called %d times, want %d", stop, got, want)
		}
	}
}
