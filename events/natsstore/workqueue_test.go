package natsstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
)

// Two runners share one work queue: every post wakes exactly one of them.
func TestWorkQueue_Next_eachPostToOneRunner(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	post(t, s, "before", "m0") // before the queue exists: DeliverNew skips it
	qs := make([]*WorkQueue, 2)
	for i := range qs {
		q, err := s.WorkQueue(ctxT(t), "runners")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(q.Stop)
		qs[i] = q
	}
	const n = 200
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	var mu sync.Mutex // protects got and total
	got := []map[string]int{{}, {}}
	total := 0
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i, q := range qs {
		wg.Go(func() {
			for {
				th, ack, err := q.Next(ctx)
				if err != nil {
					return
				}
				ack()
				mu.Lock()
				got[i][th]++
				if total++; total == n {
					close(done)
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		post(t, s, fmt.Sprintf("t%03d", i), "m")
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("only %d of %d posts delivered", total, n)
	}
	cancel()
	wg.Wait()
	for i := range n {
		th := fmt.Sprintf("t%03d", i)
		if c := got[0][th] + got[1][th]; c != 1 {
			t.Errorf("thread %s delivered %d times (%d and %d)", th, c, got[0][th], got[1][th])
		}
	}
	if got[0]["before"]+got[1]["before"] != 0 {
		t.Error("a post from before the queue existed was delivered")
	}
	if len(got[0]) == 0 || len(got[1]) == 0 {
		t.Errorf("one runner got every post: %d and %d", len(got[0]), len(got[1]))
	}
	t.Logf("runner 0 woke for %d threads, runner 1 for %d", len(got[0]), len(got[1]))
}

// The queue keeps its position: posts made while no runner runs are
// delivered when one starts again.
func TestWorkQueue_Next_resumes(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	q, err := s.WorkQueue(ctxT(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if q.Name() != DefaultWorkQueue {
		t.Fatalf("name %q", q.Name())
	}
	q.Stop()
	post(t, s, "while-down", "m1")
	q2, err := s.WorkQueue(ctxT(t), "")
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Stop()
	th, ack, err := q2.Next(ctxT(t))
	if err != nil || th != "while-down" {
		t.Fatalf("Next = %q, %v", th, err)
	}
	ack()
}

// A post whose ack never comes (its runner died before it claimed the
// thread) goes to another runner after the ack wait; an acked one does not.
func TestWorkQueue_unackedRedelivered(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	const wait = 300 * time.Millisecond
	q1, err := s.openWorkQueue(ctxT(t), "unacked", wait)
	if err != nil {
		t.Fatal(err)
	}
	defer q1.Stop()
	post(t, s, "dropped", "m1")
	th, _, err := q1.Next(ctxT(t))
	if err != nil || th != "dropped" {
		t.Fatalf("Next = %q, %v", th, err)
	}
	q1.Stop() // dies without acking
	q2, err := s.openWorkQueue(ctxT(t), "unacked", wait)
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Stop()
	th, ack, err := q2.Next(ctxT(t))
	if err != nil || th != "dropped" {
		t.Fatalf("redelivery: Next = %q, %v", th, err)
	}
	ack()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := q2.cons.Info(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending == 0 && info.NumPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the ack: %d pending acks, %d pending posts; want none", info.NumAckPending, info.NumPending)
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
}

// Stop and a cancelled ctx end a blocked Next; a closed store ends it with
// ErrClosed.
func TestWorkQueue_Next_stops(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	q, err := s.WorkQueue(ctxT(t), "stops")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, _, err := q.Next(ctxT(t)); errc <- err }()
	q.Stop()
	if err := <-errc; !errors.Is(err, events.ErrClosed) {
		t.Fatalf("Next after Stop: %v", err)
	}
	q2, err := s.WorkQueue(ctxT(t), "stops")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 200*time.Millisecond)
	defer cancel()
	if _, _, err := q2.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next past its deadline: %v", err)
	}
}

// A consumer of the queue's name with another filter is refused, not used.
func TestWorkQueue_refusesOtherConsumer(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	if _, err := s.openDurable(ctxT(t), events.DurableConfig{Name: "taken"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WorkQueue(ctxT(t), "taken"); !errors.Is(err, events.ErrUnsafeConfig) {
		t.Fatalf("WorkQueue over a read model's durable: %v", err)
	}
}

// A Next that gives up (its ctx ends) loses no post the server delivered
// meanwhile: the next Next returns it. With a pull of its own per call, a
// post the server sent as the call gave up waited for the ack wait (here
// longer than the test), and one lost twice waited two (issue 21).
func TestWorkQueue_Next_givingUpLosesNothing(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	q, err := s.openWorkQueue(ctxT(t), "impatient", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	const n = 300
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	got := map[string]bool{}
	posted := make(chan struct{})
	go func() {
		defer close(posted)
		for i := range n {
			post(t, s, fmt.Sprintf("t%03d", i), "m")
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for len(got) < n && time.Now().Before(deadline) {
		// Give up after 0-3 ms, often as the server sends the next post.
		ctx, cancel := context.WithTimeout(ctxT(t), time.Duration(rng.IntN(3000))*time.Microsecond)
		th, _, err := q.Next(ctx) // never acked: each comes once
		cancel()
		if err == nil {
			if got[th] {
				t.Fatalf("%s delivered twice within the ack wait", th)
			}
			got[th] = true
		}
	}
	<-posted
	if len(got) < n {
		t.Fatalf("%d of %d posts delivered; the rest wait for the ack wait", len(got), n)
	}
}

// The queue's pull subscription outlives a dropped connection and a
// restarted server: a post made after either still reaches a blocked Next.
func TestWorkQueue_Next_acrossKickAndRestart(t *testing.T) {
	cfg, srv := restartable(t)
	var err error
	s := open(t, srv)
	poster := open(t, srv)
	q, err := s.WorkQueue(ctxT(t), "")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	next := func(want string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctxT(t), 45*time.Second)
		defer cancel()
		th, ack, err := q.Next(ctx)
		if err != nil || th != want {
			t.Fatalf("Next = %q, %v; want %s", th, err, want)
		}
		ack()
	}
	post(t, poster, "first", "m")
	next("first") // the subscription is up

	cid, err := s.nc.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.NATS().DisconnectClientByID(cid); err != nil {
		t.Fatal(err)
	}
	post(t, poster, "after-kick", "m")
	next("after-kick")

	srv.Shutdown()
	if srv, err = natsembed.Start(cfg); err != nil {
		t.Fatal(err)
	}
	testkit.CheckFor(t, 20*time.Second, func() error {
		_, err := poster.Post(ctxT(t), "after-restart", &eventspb.MessagePosted{MessageId: "m", Text: "m"})
		return err
	})
	next("after-restart")
}

// Release hands back at once what was handed out and not acknowledged: a
// second runner gets it now, long before the ack wait, and gets nothing
// that was acknowledged.
func TestWorkQueue_Release_handsBackWhatWasNotAcked(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	q1, err := s.openWorkQueue(ctxT(t), "release", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range []string{"a", "b", "c"} {
		post(t, s, th, "m")
	}
	acks := map[string]func(){}
	for range 3 {
		th, ack, err := q1.Next(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		acks[th] = ack
	}
	acks["b"]()
	q1.Release()
	q1.Release() // a second is harmless
	q2, err := s.openWorkQueue(ctxT(t), "release", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Stop()
	got := map[string]bool{}
	for range 2 {
		ctx, cancel := context.WithTimeout(ctxT(t), 30*time.Second)
		th, ack, err := q2.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("after Release, got %v and then %v; want a and c after the release delay, long before the 10 min ack wait", got, err)
		}
		got[th] = true
		ack()
	}
	if !got["a"] || !got["c"] {
		t.Fatalf("handed back %v, want a and c", got)
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 200*time.Millisecond)
	defer cancel()
	if th, _, err := q2.Next(ctx); err == nil {
		t.Fatalf("also handed back %s, which was acknowledged or not held", th)
	}
}
