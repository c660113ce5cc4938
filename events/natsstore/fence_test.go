package natsstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

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
				eventstest.RunRunFence(t, eventstest.Harness{
					Subjects: events.Subjects{Partitions: p, RunFence: true},
					Open: func(t *testing.T, now func() time.Time) events.Store {
						s := open(t, srv, func(c *Config) { c.Now, c.Partitions, c.Fence = now, p, FenceRun })
						s.direct = s.direct && direct
						return s
					},
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
