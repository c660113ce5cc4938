package runner_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/internal/testkit"
)

// raceStore forces one interleaving on thread th: the first claim's load
// reads the thread and then waits (loaded, then goLoad), so a post can land
// after the load and before the claim is done; the follow holds that post
// back until the claim has been released (holdPost, then goFollow), so the
// claim never sees it; and the second lease acquisition blocks (reclaim)
// until its context ends, so the runner can be killed between its release
// and its claim again, as a crash there would.
type raceStore struct {
	*memstore.Store
	th       string
	loads    atomic.Int32
	acquires atomic.Int32
	holdPost atomic.Uint64 // the post the follow holds back; 0: none
	loaded   chan struct{}
	goLoad   chan struct{}
	goFollow chan struct{}
	reclaim  chan struct{}
}

func newRaceStore(s *memstore.Store, th string) *raceStore {
	return &raceStore{Store: s, th: th, loaded: make(chan struct{}), goLoad: make(chan struct{}),
		goFollow: make(chan struct{}), reclaim: make(chan struct{})}
}

func (s *raceStore) Load(ctx context.Context, th string, from uint64) ([]events.Envelope, error) {
	envs, err := s.Store.Load(ctx, th, from)
	if th == s.th && s.loads.Add(1) == 1 {
		close(s.loaded)
		select {
		case <-s.goLoad:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return envs, err
}

func (s *raceStore) AcquireSessionLease(ctx context.Context, th, holder string, ss events.Session) (events.Lease, error) {
	if th == s.th && s.acquires.Add(1) == 2 {
		close(s.reclaim)
		<-ctx.Done()
		return events.Lease{}, ctx.Err()
	}
	return s.Store.AcquireSessionLease(ctx, th, holder, ss)
}

func (s *raceStore) Tail(ctx context.Context, filter string, from uint64) (events.Tail, error) {
	t, err := s.Store.Tail(ctx, filter, from)
	if err != nil {
		return nil, err
	}
	return &holdTail{Tail: t, s: s}, nil
}

type holdTail struct {
	events.Tail
	s *raceStore
}

func (t *holdTail) Next(ctx context.Context) (events.Envelope, error) {
	env, err := t.Tail.Next(ctx)
	if err == nil && env.Seq == t.s.holdPost.Load() {
		select {
		case <-t.s.goFollow:
		case <-ctx.Done():
			return events.Envelope{}, ctx.Err()
		}
	}
	return env, err
}

// queueWork models the work queue for the runners sharing it: a wake-up
// goes to one runner and stays that runner's until it acknowledges it;
// Redeliver hands the unacknowledged ones to another, as the queue does
// after its AckWait.
type queueWork struct {
	mu      sync.Mutex // protects unacked
	unacked map[int]string
	next    int
	wake    chan int
	acked   atomic.Int64
}

func newQueueWork() *queueWork {
	return &queueWork{unacked: map[int]string{}, wake: make(chan int, 16)}
}

// post wakes a runner for th.
func (q *queueWork) post(th string) {
	q.mu.Lock()
	id := q.next
	q.next++
	q.unacked[id] = th
	q.mu.Unlock()
	q.wake <- id
}

// redeliver hands every wake-up not yet acknowledged out again and
// returns how many.
func (q *queueWork) redeliver() int {
	q.mu.Lock()
	var ids []int
	for id := range q.unacked {
		ids = append(ids, id)
	}
	q.mu.Unlock()
	for _, id := range ids {
		q.wake <- id
	}
	return len(ids)
}

func (q *queueWork) Next(ctx context.Context) (string, func(), error) {
	select {
	case id := <-q.wake:
		q.mu.Lock()
		th := q.unacked[id]
		q.mu.Unlock()
		return th, func() {
			q.mu.Lock()
			if _, ok := q.unacked[id]; ok {
				delete(q.unacked, id)
				q.acked.Add(1)
			}
			q.mu.Unlock()
		}, nil
	case <-ctx.Done():
		return "", nil, ctx.Err()
	}
}

func (q *queueWork) Stop() {}

// waitClosed waits for ch to be closed, failing t after a while.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// Issue 21: a post lands after a claim's load and before its release. Its
// wake-up reached the claiming runner while the claim was in flight. The
// claim (a probe of a lapsed session's thread) never saw the post, released
// the thread as idle, saw the post in its release's re-check, and the
// runner died before it claimed again. The wake-up must still be
// unacknowledged then, so the work queue hands it to another runner, which
// answers the post. (Acknowledged at the claim, it left the post stranded:
// nothing else would ever look at the released thread.)
func TestRunner_postAfterClaimLoadNotStranded(t *testing.T) {
	const th = "s"
	log := memstore.NewLog()
	s := log.Open(memstore.Config{})
	ttl := 300 * time.Millisecond
	ctx := context.Background()

	// A dead runner's claim: its session closed, so the thread is a lapsed
	// session's, and the next runner probes it.
	dead, err := s.OpenSession(ctx, "dead", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.AcquireSessionMarker(ctx, s, dead, th, "dead/1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseSession(ctx, dead); err != nil {
		t.Fatal(err)
	}

	rs := newRaceStore(log.Open(memstore.Config{}), th)
	work := newQueueWork()
	a := startRunner(t, runner.Config{Store: rs, ID: "A", ClaimTTL: ttl, IdleTimeout: time.Hour, Work: work})
	t.Cleanup(a.Kill) // when the test fails half way
	// A's probe has its marker and has read the thread.
	waitClosed(t, rs.loaded, "A's probe to read the thread")

	// Held back from the follow from the start: the log is quiet until
	// the post (the probe waits in its load).
	rs.holdPost.Store(uint64(log.Len()) + 1)
	if seq := post(t, s, th, "hello"); seq != rs.holdPost.Load() {
		t.Fatalf("the post landed at %d, not %d", seq, rs.holdPost.Load())
	}
	work.post(th)
	testkit.WaitFor(t, 10*time.Second, "A takes the wake-up while its claim is in flight", func() (bool, string) {
		d := a.Describe(ctx, []string{th})[th]
		return strings.Contains(d, "claiming(") && strings.Contains(d, "parked=1"), d
	})
	close(rs.goLoad)
	waitClosed(t, rs.reclaim, "A to release the thread as idle and claim it again") // its re-check saw the post
	if v := fold(t, s, th); !v.Claim.Released || len(v.Pending()) != 1 {
		t.Fatalf("want the claim released with the post pending: released %v, pending %d", v.Claim.Released, len(v.Pending()))
	}
	a.Kill() // a crash between the release and the claim again
	close(rs.goFollow)
	acked := work.acked.Load()

	b := startRunner(t, runner.Config{Store: log.Open(memstore.Config{}), ID: "B", ClaimTTL: ttl, IdleTimeout: time.Hour, Work: work})
	defer b.Stop(ctx)
	n := work.redeliver() // A's AckWait ran out
	if err := testkit.Poll(10*time.Second, func() error {
		if ok, state := settled(t, s, th)(); !ok {
			return fmt.Errorf("%s", state)
		}
		return nil
	}); err != nil {
		t.Fatalf("the post is stranded: A acknowledged %d wake-ups before it died, %d were handed to B, and no runner looks at the released thread: %v", acked, n, err)
	}
	if acked != 0 {
		t.Fatalf("A acknowledged the wake-up of a post its claim never loaded")
	}
	if k := a.Stats().KeptParked; k != 1 {
		t.Fatalf("A kept %d wake-ups parked past its claim, want 1", k)
	}
	auditClean(t, s, th)
}

// Wake has the runner read a stranded thread (a post nobody was woken for,
// its claim released) and claim it: what serve does when its projector
// reports one. A bad thread id is ignored.
func TestRunner_Wake_claimsStranded(t *testing.T) {
	const th = "w"
	log := memstore.NewLog()
	s := log.Open(memstore.Config{})
	ctx := context.Background()
	c, _, err := events.AcquireClaim(ctx, s, th, "gone/1", time.Second, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	post(t, s, th, "hello")
	if err := events.ReleaseClaim(ctx, s, c, "idle", time.Now()); err != nil {
		t.Fatal(err)
	}
	work := newQueueWork() // no wake-up for the post
	r := startRunner(t, runner.Config{Store: log.Open(memstore.Config{}), ID: "R", ClaimTTL: 300 * time.Millisecond, IdleTimeout: time.Hour, Work: work})
	defer r.Stop(ctx)
	r.Wake("not a thread id!")
	r.Wake(th)
	testkit.WaitFor(t, 10*time.Second, "the stranded post answered", settled(t, s, th))
	if st := r.Stats(); st.Peeks != 1 || st.Claims != 1 {
		t.Fatalf("stats %+v: want one read and one claim", st)
	}
	auditClean(t, s, th)
}
