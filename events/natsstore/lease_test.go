package natsstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
)

func TestStore_Lease_lifecycle(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	clock := eventstest.NewClock(0)
	s := open(t, srv, func(c *Config) { c.Now = clock.Now })
	l, err := s.AcquireLease(ctxT(t), "T", "A", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Revision == 0 || l.Holder != "A" || !l.Expires.Equal(eventstest.Epoch.Add(10*time.Second)) {
		t.Fatalf("lease %+v", l)
	}
	_, err = s.AcquireLease(ctxT(t), "T", "B", 10*time.Second)
	if !errors.Is(err, events.ErrThreadBusy) || !strings.Contains(err.Error(), "held by A") {
		t.Fatalf("acquire a held lease: %v, want ErrThreadBusy naming A", err)
	}
	l2, err := s.RenewLease(ctxT(t), l)
	if err != nil || l2.Revision <= l.Revision {
		t.Fatalf("renew: %+v %v", l2, err)
	}
	if _, err := s.RenewLease(ctxT(t), l); !errors.Is(err, events.ErrLeaseLost) {
		t.Fatalf("renew from a stale revision: %v, want ErrLeaseLost", err)
	}
	if err := s.ReleaseLease(ctxT(t), l); !errors.Is(err, events.ErrLeaseLost) {
		t.Fatalf("release from a stale revision: %v, want ErrLeaseLost", err)
	}
	if err := s.ReleaseLease(ctxT(t), l2); err != nil {
		t.Fatal(err)
	}
	if got, live, err := s.GetLease(ctxT(t), "T"); err != nil || live || got.Holder != "" {
		t.Fatalf("released lease: %+v live=%v err=%v", got, live, err)
	}
	if _, err := s.RenewLease(ctxT(t), l2); !errors.Is(err, events.ErrLeaseLost) {
		t.Fatalf("renew a released lease: %v, want ErrLeaseLost", err)
	}
	l3, err := s.AcquireLease(ctxT(t), "T", "B", 10*time.Second)
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	if _, err := s.AcquireLease(ctxT(t), "T", "B", 0); !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("zero TTL: %v", err)
	}
	_ = l3
}

// Lapse is decided by the store's clock: a skewed clock takes a lease whose
// holder still counts it live.
func TestStore_AcquireLease_lapseBySkewedClock(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	slow, fast := eventstest.NewClock(0), eventstest.NewClock(time.Minute)
	a := open(t, srv, func(c *Config) { c.Now = slow.Now })
	b := open(t, srv, func(c *Config) { c.Now = fast.Now })
	la, err := a.AcquireLease(ctxT(t), "T", "A", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, live, _ := b.GetLease(ctxT(t), "T"); live {
		t.Fatal("B's clock is a minute ahead: A's lease should look lapsed")
	}
	lb, err := b.AcquireLease(ctxT(t), "T", "B", 10*time.Second)
	if err != nil {
		t.Fatalf("B takes a lease lapsed by its clock: %v", err)
	}
	if got, live, _ := a.GetLease(ctxT(t), "T"); !live || got.Holder != "B" || got.Revision != lb.Revision {
		t.Fatalf("A's view: %+v live=%v, want B's live lease", got, live)
	}
	if _, err := a.RenewLease(ctxT(t), la); !errors.Is(err, events.ErrLeaseLost) {
		t.Fatalf("A renews a lease B took: %v", err)
	}
}

// The server enforces the TTL, and a renewal keeps it: with clocks frozen so
// that no store ever sees the lease lapse, the key still goes away once its
// holder stops renewing.
func TestStore_RenewLease_keepsServerTTL(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	frozen := eventstest.NewClock(0)
	s := open(t, srv, func(c *Config) { c.Now = frozen.Now })
	l, err := s.AcquireLease(ctxT(t), "T", "A", 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if l, err = s.RenewLease(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
	m, err := s.getMsg(ctxT(t), s.kvStream, msgGetRequest{LastFor: s.kvPrefix + "T"})
	if err != nil {
		t.Fatal(err)
	}
	if ttl := m.Header.Get("Nats-TTL"); ttl != "2s" {
		t.Fatalf("renewed lease carries Nats-TTL %q, want 2s (1.5s rounded up)", ttl)
	}
	if _, live, _ := s.GetLease(ctxT(t), "T"); !live {
		t.Fatal("renewed lease not live")
	}
	start := time.Now()
	testkit.CheckFor(t, 15*time.Second, func() error {
		if _, live, err := s.GetLease(ctxT(t), "T"); err != nil || live {
			return fmt.Errorf("lease still live server-side after %s (err %v)", time.Since(start), err)
		}
		return nil
	})
	t.Logf("lease expired server-side %s after its last renewal", time.Since(start).Round(10*time.Millisecond))
	if _, err := s.AcquireLease(ctxT(t), "T", "B", time.Second); err != nil {
		t.Fatalf("acquire after server-side expiry: %v", err)
	}
	if _, err := s.RenewLease(ctxT(t), l); !errors.Is(err, events.ErrLeaseLost) {
		t.Fatalf("renew an expired lease: %v, want ErrLeaseLost", err)
	}
}

// A lease watch stopped while nobody reads it, with more updates delivered
// than its channel holds, leaves no goroutine behind: nats.go's callback is
// blocked sending on the full channel, and Stop must let it go (issue 21).
func TestStore_WatchLeases_stopWhileFull(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	before := goleak.IgnoreCurrent()
	w, err := s.WatchLeases(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	const n = 300 // the watcher's channel holds 256
	for i := range n {
		if _, err := s.AcquireLease(ctxT(t), fmt.Sprintf("w%d", i), "A", 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	lw := w.(*leaseWatch)
	testkit.WaitFor(t, 10*time.Second, "the watch's channel full", func() (bool, string) {
		return len(lw.w.Updates()) == cap(lw.w.Updates()), fmt.Sprintf("%d of %d", len(lw.w.Updates()), cap(lw.w.Updates()))
	})
	w.Stop()
	w.Stop() // twice is fine
	if err := goleak.Find(before); err != nil && strings.Contains(err.Error(), "WatchFiltered") {
		t.Fatalf("the stopped watch left its callback blocked: %v", err)
	}
}
