package summaries

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/eventgen"
	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openStore(t testing.TB, srv *natsembed.Server) *natsstore.Store {
	t.Helper()
	s, err := natsstore.New(ctxT(t), natsstore.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// publisher writes a generated log's stored messages to the stream as they
// are, in order, so the stream holds the log at the same sequences. The
// expected-sequence headers are dropped: some faults break them on purpose,
// and summaries do not read them.
type publisher struct {
	js   jetstream.JetStream
	msgs []eventgen.Msg
	next int
}

func newPublisher(t testing.TB, srv *natsembed.Server, l *eventgen.Log) *publisher {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &publisher{js: js, msgs: l.Msgs}
}

// publish stores the next n messages (all that are left when n < 0).
func (p *publisher) publish(t testing.TB, n int) {
	t.Helper()
	if n < 0 || p.next+n > len(p.msgs) {
		n = len(p.msgs) - p.next
	}
	for i, m := range p.msgs[p.next : p.next+n] {
		if i%1000 == 999 {
			<-p.js.PublishAsyncComplete()
		}
		h := nats.Header{}
		for k, v := range m.Header {
			if k != events.HeaderExpectSeq && k != events.HeaderExpectSubj {
				h[k] = v
			}
		}
		if _, err := p.js.PublishMsgAsync(&nats.Msg{Subject: m.Subject, Header: h, Data: m.Data}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-p.js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("publishes not acked")
	}
	p.next += n
}

// testLog is a clean log with faults (garbage, bad headers, stale fences),
// over a few threads, so that summaries see every kind of event.
func testLog(seed uint64, events int) *eventgen.Log {
	return randomLog(seed, eventgen.Config{Threads: 12, Events: events, Faults: 0.03})
}

func newTestProjector(t testing.TB, s events.ReadModelStore, bucket string, mod ...func(*Config)) *Projector {
	t.Helper()
	cfg := Config{Store: s, Bucket: bucket, Durable: bucket, Owner: "test-" + bucket, LeaseTTL: 3 * time.Second, Batch: 100}
	for _, m := range mod {
		m(&cfg)
	}
	p, err := NewProjector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// storedSummaries reads every summary in bucket as stored.
func storedSummaries(t testing.TB, s events.ReadModelStore, bucket string) map[string]Summary {
	t.Helper()
	b, err := s.OpenBucket(ctxT(t), bucket, false)
	if err != nil {
		t.Fatal(err)
	}
	subj := s.Subjects()
	cps, err := readCheckpoints(ctxT(t), b, subj)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Summary{}
	err = b.Scan(ctxT(t), "*", func(e events.KVEntry) error {
		var st stored
		if err := json.Unmarshal(e.Value, &st); err != nil {
			return err
		}
		if cp := cps[subj.PartitionOf(e.Key)]; st.Epoch != cp.Epoch {
			return fmt.Errorf("%s is stored with epoch %d, the checkpoint's is %d", e.Key, st.Epoch, cp.Epoch)
		}
		out[e.Key] = st.Summary
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// reference folds every thread of the stream with projections.Thread.
func reference(t testing.TB, s events.ReadModelStore) map[string]Summary {
	t.Helper()
	threads := map[string]*projections.Thread{}
	subj := s.Subjects()
	for p := range subj.PartitionCount() {
		_, err := s.Replay(ctxT(t), subj.PartitionAll(p), 1, func(env events.Envelope) error {
			if events.ValidateThreadID(env.Thread) != nil {
				return nil
			}
			if threads[env.Thread] == nil {
				threads[env.Thread] = projections.New(env.Thread)
			}
			threads[env.Thread].Apply(env)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]Summary{}
	for id, th := range threads {
		out[id] = FromThread(th)
	}
	return out
}

func postMsg(id string) *eventspb.MessagePosted {
	return &eventspb.MessagePosted{MessageId: id, Author: "test", Text: "hello " + id}
}

func sameSummaries(t testing.TB, what string, got, want map[string]Summary) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d summaries, want %d", what, len(got), len(want))
	}
	for id, w := range want {
		if g := got[id]; !reflect.DeepEqual(g, w) {
			t.Fatalf("%s: thread %s:\n got %+v\nwant %+v", what, id, g, w)
		}
	}
}

// waitCaughtUp polls the lag until the checkpoint is the stream's last
// sequence and the consumer has nothing pending.
func waitCaughtUp(t testing.TB, p *Projector) Lag {
	t.Helper()
	var l Lag
	testkit.WaitFor(t, 30*time.Second, "projector caught up", func() (bool, string) {
		var err error
		l, err = p.Lag(ctxT(t))
		return err == nil && l.Behind == 0 && l.NumPending == 0 && l.Checkpoint > 0, fmt.Sprintf("%+v, %v", l, err)
	})
	return l
}

// runInBackground runs p until the test ends, and returns a stop function.
func runInBackground(t testing.TB, p *Projector) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// Built incrementally while events stream in, then rebuilt from zero into a
// fresh bucket and in place: every summary is the same, and each equals the
// reference fold.
func TestProjector_rebuildEqualsIncremental(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := openStore(t, srv)
	pub := newPublisher(t, srv, testLog(1, 6000))
	pub.publish(t, 1500) // some history before the projector starts
	inc := newTestProjector(t, s, "incremental")
	stop := runInBackground(t, inc)
	for pub.next < len(pub.msgs) {
		pub.publish(t, 700)
	}
	waitCaughtUp(t, inc)
	stop()
	want := reference(t, s)
	sameSummaries(t, "incremental", storedSummaries(t, s, "incremental"), want)

	var last Progress
	fresh := Config{Store: s, Bucket: "rebuilt", Durable: "rebuilt", Batch: 500, Progress: func(p Progress) { last = p }}
	if _, err := Rebuild(ctxT(t), fresh, false); err != nil {
		t.Fatal(err)
	}
	sameSummaries(t, "rebuilt", storedSummaries(t, s, "rebuilt"), want)
	if last.Checkpoint != uint64(len(pub.msgs)) {
		t.Fatalf("last progress %+v, want checkpoint %d", last, len(pub.msgs))
	}
	st, err := Rebuild(ctxT(t), Config{Store: s, Bucket: "incremental", Durable: "incremental"}, false)
	if err != nil {
		t.Fatal(err)
	}
	sameSummaries(t, "rebuilt in place", storedSummaries(t, s, "incremental"), want)
	l, err := ReadLag(ctxT(t), s, "incremental", "incremental")
	if err != nil || l.Epoch != 1 || l.Behind != 0 || l.Owner != "" {
		t.Fatalf("after rebuild in place: %+v, %v", l, err)
	}
	t.Logf("rebuild in place: %+v", st)

	// Read folds the tail the projector has not applied yet.
	if _, err := s.Post(ctxT(t), "tail-thread", postMsg("m1")); err != nil {
		t.Fatal(err)
	}
	snap, err := Read(ctxT(t), s, "incremental")
	if err != nil || snap.Folded != 1 || snap.LastSeq != uint64(len(pub.msgs)+1) {
		t.Fatalf("Read: folded %d, last %d, %v", snap.Folded, snap.LastSeq, err)
	}
	ref := reference(t, s)
	got := map[string]Summary{}
	for _, sum := range snap.Summaries {
		got[sum.Thread] = sum
	}
	sameSummaries(t, "Read", got, ref)
}

// Stopped mid catch-up in every way a projector can stop (a crash after
// writing summaries but before the checkpoint, a crash before the ack, a
// cancelled context, a dropped connection), then restarted: the result is
// the uninterrupted run's.
func TestProjector_crashAndResume(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := openStore(t, srv)
	pub := newPublisher(t, srv, testLog(3, 5000))
	pub.publish(t, -1)
	if err := newTestProjector(t, s, "ref").CatchUp(ctxT(t), 0); err != nil {
		t.Fatal(err)
	}
	want := storedSummaries(t, s, "ref")
	sameSummaries(t, "uninterrupted", want, reference(t, s))

	crash := errors.New("crash")
	for _, stage := range []string{stageWritten, stageCheckpointed} {
		t.Run(stage, func(t *testing.T) {
			bucket := "crash-" + stage
			for round := 0; ; round++ {
				p := newTestProjector(t, s, bucket)
				batches := 0
				p.hook = func(st string) error {
					if st == stage {
						if batches++; batches == 7 {
							return crash
						}
					}
					return nil
				}
				err := p.CatchUp(ctxT(t), 0)
				if err == nil {
					if round == 0 {
						t.Fatal("never crashed")
					}
					if stage == stageWritten && p.Stats().Skipped == 0 {
						t.Error("the restart skipped nothing, yet the crash left summaries past the checkpoint")
					}
					break
				}
				if !errors.Is(err, crash) {
					t.Fatal(err)
				}
			}
			sameSummaries(t, "after crashes at "+stage, storedSummaries(t, s, bucket), want)
		})
	}
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctxT(t))
		p := newTestProjector(t, s, "cancelled", func(c *Config) {
			c.Progress = func(pr Progress) {
				if pr.Checkpoint > 2000 {
					cancel()
				}
			}
		})
		if err := p.CatchUp(ctx, 0); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled catch-up: %v", err)
		}
		l, err := p.Lag(ctxT(t))
		if err != nil || l.Checkpoint < 2000 || l.Behind == 0 {
			t.Fatalf("lag after cancel: %+v, %v", l, err)
		}
		if err := newTestProjector(t, s, "cancelled").CatchUp(ctxT(t), 0); err != nil {
			t.Fatal(err)
		}
		sameSummaries(t, "after cancel", storedSummaries(t, s, "cancelled"), want)
	})
	t.Run("connection", func(t *testing.T) {
		own := openStore(t, srv) // the projector's connection, dropped mid-run
		dropped := make(chan struct{})
		p := newTestProjector(t, own, "dropped", func(c *Config) {
			c.Owner = "restarting"
			c.Progress = func(pr Progress) {
				if pr.Checkpoint > 1000 {
					select {
					case <-dropped:
					default:
						close(dropped)
						own.Conn().Close()
					}
				}
			}
		})
		if err := p.CatchUp(ctxT(t), 0); err == nil {
			t.Fatal("catch-up survived its connection")
		}
		// The restarted process has the same owner name: it takes over its
		// own lease at once.
		again := newTestProjector(t, openStore(t, srv), "dropped", func(c *Config) { c.Owner = "restarting" })
		if err := again.CatchUp(ctxT(t), 0); err != nil {
			t.Fatal(err)
		}
		sameSummaries(t, "after a dropped connection", storedSummaries(t, s, "dropped"), want)
	})
}

// Lag is reported from what is stored, and goes to 0 once the projector has
// caught up; without a projector it grows with the stream.
func TestProjector_lag(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := openStore(t, srv)
	if _, err := ReadLag(ctxT(t), s, "lagging", "lagging"); !errors.Is(err, ErrNoReadModel) {
		t.Fatalf("lag without a bucket: %v", err)
	}
	pub := newPublisher(t, srv, testLog(4, 2000))
	pub.publish(t, 1000)
	p := newTestProjector(t, s, "lagging")
	stop := runInBackground(t, p)
	l := waitCaughtUp(t, p)
	if l.Checkpoint != 1000 || !l.OwnerLive || l.Owner != p.Owner() || !l.DurableExists {
		t.Fatalf("caught up: %+v", l)
	}
	stop()
	pub.publish(t, 500)
	l, err := p.Lag(ctxT(t))
	if err != nil || l.Behind != 500 || l.NumPending != 500 || l.OwnerLive {
		t.Fatalf("stopped projector: %+v, %v", l, err)
	}
	runInBackground(t, p)
	if l := waitCaughtUp(t, p); l.Checkpoint != 1500 {
		t.Fatalf("resumed: %+v", l)
	}
}

// Two projectors on one read model: one owns it, the other stands by and
// takes over when the first stops; the result is the same as one's.
func TestProjector_standbyTakesOver(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := openStore(t, srv)
	pub := newPublisher(t, srv, testLog(5, 3000))
	pub.publish(t, 1000)
	a := newTestProjector(t, s, "shared", func(c *Config) { c.Owner = "a" })
	b := newTestProjector(t, s, "shared", func(c *Config) { c.Owner = "b" })
	stopA := runInBackground(t, a)
	waitCaughtUp(t, a)
	runInBackground(t, b)
	pub.publish(t, 1000)
	waitCaughtUp(t, a)
	if got := a.Stats().Events + b.Stats().Events; got != 2000 || b.Stats().Events != 0 {
		t.Fatalf("while a runs: a applied %d, b %d", a.Stats().Events, b.Stats().Events)
	}
	stopA() // releases: b takes over at its next try
	pub.publish(t, -1)
	l := waitCaughtUp(t, b)
	if l.Owner != "b" || b.Stats().Events == 0 {
		t.Fatalf("after a stopped: %+v, b applied %d", l, b.Stats().Events)
	}
	sameSummaries(t, "shared", storedSummaries(t, s, "shared"), reference(t, s))
	_, err := Rebuild(ctxT(t), Config{Store: s, Bucket: "shared", Durable: "shared"}, false)
	if !errors.Is(err, ErrOwned) {
		t.Fatalf("rebuild under a live owner: %v", err)
	}
	if _, err := Rebuild(ctxT(t), Config{Store: s, Bucket: "shared", Durable: "shared"}, true); err != nil {
		t.Fatalf("forced rebuild: %v", err)
	}
	for i := range 50 {
		if _, err := s.Post(ctxT(t), fmt.Sprintf("after-%d", i%3), postMsg(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	l = waitCaughtUp(t, b) // b was fenced out by the rebuild, then took the read model back
	sameSummaries(t, "after a forced rebuild", storedSummaries(t, s, "shared"), reference(t, s))
	t.Logf("final %+v; b %+v", l, b.Stats())
}

// A forced rebuild while another projector is busy writing: the old owner
// is fenced out (its late writes are of an old epoch, or refused), stands
// by, and takes the read model back; the result equals the reference.
func TestProjector_forcedRebuildUnderWriter(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := openStore(t, srv)
	pub := newPublisher(t, srv, testLog(6, 6000))
	pub.publish(t, -1)
	rebuilt := make(chan error, 1)
	var once sync.Once
	a := newTestProjector(t, s, "busy", func(c *Config) {
		c.Owner, c.Batch = "a", 20
		c.Progress = func(pr Progress) {
			if pr.Checkpoint > 1500 {
				once.Do(func() {
					go func() {
						_, err := Rebuild(ctxT(t), Config{Store: s, Bucket: "busy", Durable: "busy", Owner: "rebuilder", Batch: 50}, true)
						rebuilt <- err
					}()
				})
			}
		}
	})
	runInBackground(t, a)
	if err := <-rebuilt; err != nil {
		t.Fatal(err)
	}
	l := waitCaughtUp(t, a)
	if l.Epoch != 1 {
		t.Fatalf("lag %+v", l)
	}
	sameSummaries(t, "after a forced rebuild under a writer", storedSummaries(t, s, "busy"), reference(t, s))
	t.Logf("a: %+v", a.Stats())
}

// The zombie case, forced: a rebuild completes between two batches of a
// projector that does not know yet, and new events arrive. Its next batch
// applies them to summaries it cached before the rebuild: its writes are
// refused (the keys moved on) or land as an old epoch, it finds the read
// model reset and stands by, and the owner that follows fixes the rest.
func TestProjector_zombieAfterRebuild(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := openStore(t, srv)
	pub := newPublisher(t, srv, testLog(7, 4000))
	pub.publish(t, 2000)
	batches := 0
	rebuilt := make(chan struct{})
	var a *Projector
	// A lease long enough that the hook's rebuild never makes a renewal
	// due: a renewal would find the takeover before the zombie batch does.
	a = newTestProjector(t, s, "zombie", func(c *Config) { c.Owner, c.LeaseTTL = "a", time.Minute })
	a.hook = func(stage string) error {
		if stage != stageCheckpointed {
			return nil
		}
		if batches++; batches == 5 {
			defer close(rebuilt)
			if _, err := Rebuild(ctxT(t), Config{Store: s, Bucket: "zombie", Durable: "zombie", Owner: "rebuilder"}, true); err != nil {
				t.Error(err)
			}
			pub.publish(t, -1)
		}
		return nil
	}
	runInBackground(t, a)
	// The rebuild catches up with the stream as it is before the rest is
	// published: waiting for the lag alone could return in that window,
	// and compare the rebuild's summaries with a later stream.
	select {
	case <-rebuilt:
	case <-ctxT(t).Done():
		t.Fatal("the rebuild hook never ran")
	}
	waitCaughtUp(t, a)
	sameSummaries(t, "after a zombie batch", storedSummaries(t, s, "zombie"), reference(t, s))
	if st := a.Stats(); st.Conflicts == 0 {
		t.Errorf("the zombie batch met no conflict: %+v", st)
	}
}

// A summary overwritten with garbage by hand is folded again from the
// stream: by Read at once, and by the projector when its thread moves.
func TestProjector_unreadableSummary(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := openStore(t, srv)
	pub := newPublisher(t, srv, testLog(8, 1000))
	pub.publish(t, -1)
	p := newTestProjector(t, s, "garbled")
	if err := p.CatchUp(ctxT(t), 0); err != nil {
		t.Fatal(err)
	}
	b, err := s.OpenBucket(ctxT(t), "garbled", false)
	if err != nil {
		t.Fatal(err)
	}
	var victim string
	for id := range reference(t, s) {
		victim = id
		break
	}
	e, _, err := b.Get(ctxT(t), victim)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctxT(t), victim, []byte("{not json"), e.Revision); err != nil {
		t.Fatal(err)
	}
	snap, err := Read(ctxT(t), s, "garbled")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Summary{}
	for _, sum := range snap.Summaries {
		got[sum.Thread] = sum
	}
	sameSummaries(t, "Read over a garbled summary", got, reference(t, s))
	if _, err := s.Post(ctxT(t), victim, postMsg("after")); err != nil {
		t.Fatal(err)
	}
	if err := p.CatchUp(ctxT(t), 0); err != nil {
		t.Fatal(err)
	}
	sameSummaries(t, "projector over a garbled summary", storedSummaries(t, s, "garbled"), reference(t, s))
}

// Redelivery through JetStream: events fetched from a durable, applied,
// left unacked and delivered again after the ack wait leave the summaries
// as they were.
func TestApply_jetStreamRedelivery(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := openStore(t, srv)
	pub := newPublisher(t, srv, testLog(9, 300))
	pub.publish(t, -1)
	d, err := s.OpenDurable(ctxT(t), events.DurableConfig{Name: "redeliver", AckWait: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]Summary{}
	apply := func(ds []events.Delivery) {
		for _, dl := range ds {
			th := dl.Env.Thread
			if events.ValidateThreadID(th) != nil {
				continue
			}
			if _, ok := sums[th]; !ok {
				sums[th] = Empty(th)
			}
			sums[th] = Apply(sums[th], dl.Env)
		}
	}
	first, err := d.Fetch(ctxT(t), 300, time.Second)
	if err != nil || len(first) != 300 {
		t.Fatalf("fetch: %d, %v", len(first), err)
	}
	apply(first)
	once := map[string]Summary{}
	for k, v := range sums {
		once[k] = v.Clone()
	}
	if err := d.Ack(ctxT(t), first[99]); err != nil { // acks the first 100
		t.Fatal(err)
	}
	var again []events.Delivery
	for len(again) < 200 {
		ds, err := d.Fetch(ctxT(t), 300, time.Second)
		if err != nil || len(ds) == 0 {
			t.Fatalf("refetch after %d: %v", len(again), err)
		}
		again = append(again, ds...)
	}
	if again[0].Delivered != 2 || again[0].Env.Seq != first[100].Env.Seq {
		t.Fatalf("redelivery %d of seq %d, want 2nd of %d", again[0].Delivered, again[0].Env.Seq, first[100].Env.Seq)
	}
	apply(again)
	sameSummaries(t, "after redelivery", sums, once)
	sameSummaries(t, "reference", sums, reference(t, s))
}

// A log written with guarded consuming appends (natsstore Guard on): the
// durable never hands the projector a guard, and the projector applies
// everything without taking a skipped guard for a delivery gap (the event
// after one says so, GuardBefore; failing that, NextSeq steps over it):
// no reset past its session's start. With both gone it resets forever.
func TestProjector_guardedLog(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s, err := natsstore.New(ctxT(t), natsstore.Config{URL: srv.ClientURL(), Guard: natsstore.GuardOn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	p := newTestProjector(t, s, "guarded")
	runInBackground(t, p)
	for i := range 5 {
		th := fmt.Sprintf("g%d", i)
		m1, err := s.Post(ctxT(t), th, postMsg(th+"-1"))
		if err != nil {
			t.Fatal(err)
		}
		m2, err := s.Post(ctxT(t), th, postMsg(th+"-2"))
		if err != nil {
			t.Fatal(err)
		}
		c, _, err := events.AcquireClaim(ctxT(t), s, th, "A", 10*time.Second, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		run, err := s.LastSeq(ctxT(t), th, events.KindRun)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m1.Seq, "echo"), events.FencedGuarded(c, run))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctxT(t), events.NewSteeringGiven(c, time.Now(), "r1", m2.Seq), events.FencedGuarded(c, rs.Seq)); err != nil {
			t.Fatal(err)
		}
	}
	waitCaughtUp(t, p)
	if st := p.Stats(); st.Resets != 1 {
		t.Fatalf("%d resets, want 1 (the session's start): a skipped guard was taken for a gap", st.Resets)
	}
	sameSummaries(t, "guarded log", storedSummaries(t, s, "guarded"), reference(t, s))
}
