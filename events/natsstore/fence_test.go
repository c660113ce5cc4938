package natsstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// The RUNFENCE layout's contract against JetStream, on one stream and on
// four partitions' streams, with direct reads and with consumers.
func TestStore_contractRunFence(t *testing.T) {
	for _, p := range []int{1, 4} {
		for _, direct := range []bool{true, false} {
			t.Run(fmt.Sprintf("P%d/direct=%t", p, direct), func(t *testing.T) {
				srv := natsembedtest.RunForTest(t)
				_, js := connect(t, srv)
				eventstest.RunRunFence(t, eventstest.Harness{
					Subjects: events.Subjects{Partitions: p, RunFence: true},
					Open: func(t *testing.T, now func() time.Time) events.Store {
						s := open(t, srv, func(c *Config) { c.Now, c.Partitions, c.Fence = now, p, FenceRun })
						s.direct = s.direct && direct
						return s
					},
					PublishRaw: publishRaw(js),
				})
			})
		}
	}
}

// A stream made in the run layout records it: a store opened with Fence ""
// takes it, one opened with Fence claim is refused (ErrLayout, naming run),
// and every partition's stream records it.
func TestStore_fenceLayoutRecorded(t *testing.T) {
	for _, p := range []int{1, 4} {
		t.Run(fmt.Sprintf("P%d", p), func(t *testing.T) {
			srv := natsembedtest.RunForTest(t)
			s := open(t, srv, func(c *Config) { c.Partitions, c.Fence = p, FenceRun })
			if !s.Subjects().RunFence {
				t.Fatal("a store opened with Fence run is not in the run layout")
			}
			for i, st := range s.streams {
				if got := st.CachedInfo().Config.Metadata[MetaFence]; got != "run" {
					t.Fatalf("partition %d's stream records %s %q, want run", i, MetaFence, got)
				}
			}
			again := open(t, srv, func(c *Config) { c.Partitions = p })
			if !again.Subjects().RunFence {
				t.Fatal("a store opened with Fence \"\" on a run-layout stream is not in the run layout")
			}
			_, err := New(ctxT(t), Config{URL: srv.ClientURL(), Partitions: p, Fence: FenceClaim})
			if !errors.Is(err, events.ErrLayout) || !strings.Contains(err.Error(), `Fence "run"`) {
				t.Fatalf("Fence claim on a run-layout stream: %v, want ErrLayout naming run", err)
			}
		})
	}
}

// The default layout is the claim layout, unchanged: no metadata key, and a
// store asking for the run layout on it is refused (ErrLayout, naming
// claim).
func TestStore_fenceLayoutDefault(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	if s.Subjects().RunFence {
		t.Fatal("the default store is in the run layout")
	}
	if _, ok := s.streams[0].CachedInfo().Config.Metadata[MetaFence]; ok {
		t.Fatalf("the default stream records %s", MetaFence)
	}
	if again := open(t, srv, func(c *Config) { c.Fence = FenceClaim }); again.Subjects().RunFence {
		t.Fatal("Fence claim on a claim-layout stream opened in the run layout")
	}
	_, err := New(ctxT(t), Config{URL: srv.ClientURL(), Fence: FenceRun})
	if !errors.Is(err, events.ErrLayout) || !strings.Contains(err.Error(), `Fence "claim"`) {
		t.Fatalf("Fence run on a claim-layout stream: %v, want ErrLayout naming claim", err)
	}
	th := eventstest.NewThread(t)
	c, _, err := events.AcquireClaim(ctxT(t), s, th, "A", eventstest.TTL, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if last, _ := s.LastSeq(ctxT(t), th, events.KindClaim); last != c.Seq {
		t.Fatalf("claim layout: marker %d, claim subject's last %d", c.Seq, last)
	}
}

// Under RUNFENCE a batch takes no claim-subject fence.
// NewFence makes a new stream in its layout and leaves an existing one in
// its own: the CLI makes run-layout streams and keeps serving claim-layout
// ones that older versions made.
func TestStore_newFence(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv, func(c *Config) { c.NewFence = FenceRun })
	if !s.Subjects().RunFence || s.streams[0].CachedInfo().Config.Metadata[MetaFence] != "run" {
		t.Fatal("NewFence run did not make a run-layout stream")
	}
	old := natsembedtest.RunForTest(t)
	open(t, old) // an older version's stream: the claim layout
	if s := open(t, old, func(c *Config) { c.NewFence = FenceRun }); s.Subjects().RunFence {
		t.Fatal("NewFence run moved an existing claim-layout stream to the run layout")
	}
	// An explicit Fence wins over NewFence.
	_, err := New(ctxT(t), Config{URL: srv.ClientURL(), Fence: FenceClaim, NewFence: FenceRun})
	if !errors.Is(err, events.ErrLayout) {
		t.Fatalf("Fence claim, NewFence run on a run-layout stream: %v, want ErrLayout", err)
	}
}

func TestAppendBatch_runFenceRefusesFence(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv, func(c *Config) { c.Fence = FenceRun })
	th := eventstest.NewThread(t)
	c, _, err := events.AcquireClaim(ctxT(t), s, th, "A", eventstest.TTL, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, chk := range []events.Check{events.Fenced(c), events.FencedGuarded(c, c.Seq)} {
		_, err = s.AppendBatch(ctxT(t), []BatchItem{{Event: events.NewRunAbandoned(c, time.Now(), "r0", c.Seq, "x"), Check: chk}})
		if !errors.Is(err, events.ErrInvalidEvent) || !strings.Contains(err.Error(), "run-subject fence layout") {
			t.Fatalf("fenced batch item %+v under RUNFENCE: %v, want ErrInvalidEvent naming the layout", chk, err)
		}
	}
	if got, _ := s.LastSeq(ctxT(t), th, events.KindRun); got != c.Seq {
		t.Fatalf("a refused batch wrote: run subject at %d, want %d", got, c.Seq)
	}
}

// Spec: RUNFENCE step 6, ambiguous outcome on R1. A run-fenced append
// lands, its ack is lost, and a newer claim lands on the run subject before
// the retry, which the server refuses (10071: it checks before it
// deduplicates). The store finds its msg id on the run subject after K, on
// a fresh context though the caller's has ended, and reports the landing.
func TestStore_Append_runFenceLostAckThenTakeover(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv, func(c *Config) { c.Fence = FenceRun })
	later := time.Now().Add(time.Minute)
	other := open(t, srv, func(c *Config) { c.Fence, c.Now = FenceRun, func() time.Time { return later } })
	m := post(t, s, "T", "m1")
	c := claim(t, s, "T", "A")
	ctx, cancel := context.WithCancel(ctxT(t))
	var landed, taken uint64
	loseAck(s, func(n int32, real func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
		pa, err := real()
		if n == 1 && err == nil {
			landed = pa.Sequence
			b, _, cerr := events.AcquireClaim(ctxT(t), other, "T", "B", 10*time.Second, later)
			if cerr != nil {
				t.Errorf("takeover: %v", cerr)
			}
			taken = b.Seq
			return nil, nats.ErrTimeout
		}
		if n == 2 {
			cancel() // the caller gives up; the settle must not
		}
		return pa, err
	})
	ack, err := s.Append(ctx, events.NewRunStarted(c, time.Now(), "r1", m, "echo"), events.FencedGuarded(c, c.Seq))
	if err != nil || ack.Seq != landed || !ack.Duplicate {
		t.Fatalf("append after a lost ack and a takeover (claim %d): %+v %v, want a duplicate of %d", taken, ack, err, landed)
	}
	if n := countType(load(t, s, "T"), events.TypeRunStarted); n != 1 {
		t.Fatalf("%d run_started stored, want 1", n)
	}
}

// A stale holder's refusal is classified (busy: a newer marker) by a read
// on a fresh context, though the caller's ended as the refusal came back.
func TestStore_Append_runFenceRefusedAfterCancel(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv, func(c *Config) { c.Fence = FenceRun })
	later := time.Now().Add(time.Minute)
	other := open(t, srv, func(c *Config) { c.Fence, c.Now = FenceRun, func() time.Time { return later } })
	m := post(t, s, "T", "m1")
	c := claim(t, s, "T", "A")
	if _, _, err := events.AcquireClaim(ctxT(t), other, "T", "B", 10*time.Second, later); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	loseAck(s, func(n int32, real func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
		pa, err := real()
		cancel()
		return pa, err
	})
	_, err := s.Append(ctx, events.NewRunStarted(c, time.Now(), "r1", m, "echo"), events.FencedGuarded(c, c.Seq))
	if !errors.Is(err, events.ErrThreadBusy) {
		t.Fatalf("stale holder, caller gone: %v, want ErrThreadBusy", err)
	}
}
