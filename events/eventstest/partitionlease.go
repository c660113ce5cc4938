package eventstest

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
)

// PartitionHarness opens handles for [RunPartitionLeaser].
type PartitionHarness struct {
	// Open returns a new handle on one shared lease bucket whose clock is
	// now, as a separate runner would have.
	Open func(t *testing.T, now func() time.Time) events.PartitionLeaser
}

// partBlock hands each test a block of partitions of its own, since the
// tests share a bucket.
var partBlock atomic.Int64

const partsPerTest = 4

func partitions(t *testing.T) int {
	t.Helper()
	return int(partBlock.Add(1)-1) * partsPerTest
}

// RunPartitionLeaser runs the contract of [events.PartitionLeaser] against
// the handles h opens.
func RunPartitionLeaser(t *testing.T, h PartitionHarness) {
	tests := []struct {
		name string
		fn   func(*testing.T, PartitionHarness)
	}{
		{"Lifecycle", testPartitionLifecycle},
		{"Lapse", testPartitionLapse},
		{"SameSession", testPartitionSameSession},
		{"List", testPartitionList},
		{"NotAThreadLease", testPartitionNotAThreadLease},
		{"BadInput", testPartitionBadInput},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

func acquirePart(t *testing.T, s events.PartitionLeaser, p int, session string) events.PartitionLease {
	t.Helper()
	l, err := s.AcquirePartition(ctxT(t), p, session, "runner-"+session, TTL)
	if err != nil {
		t.Fatalf("acquire partition %d for %s: %v", p, session, err)
	}
	if l.Partition != p || l.Session != session || l.Revision == 0 || l.TTL != TTL || !l.Live {
		t.Fatalf("acquired %+v", l)
	}
	return l
}

// A partition's lease is held by one session until released; renewals and
// releases are compare-and-set on its revision.
func testPartitionLifecycle(t *testing.T, h PartitionHarness) {
	s := h.Open(t, time.Now)
	p := partitions(t)
	la := acquirePart(t, s, p, "sa")
	_, err := s.AcquirePartition(ctxT(t), p, "sb", "runner-sb", TTL)
	wantErr(t, err, events.ErrPartitionBusy, "acquire a partition another session holds")
	acquirePart(t, s, p+1, "sb") // partitions are independent
	la2, err := s.RenewPartition(ctxT(t), la)
	if err != nil || la2.Revision <= la.Revision || la2.Session != "sa" {
		t.Fatalf("renew: %+v %v", la2, err)
	}
	_, err = s.RenewPartition(ctxT(t), la)
	wantErr(t, err, events.ErrLeaseLost, "renew from a stale revision")
	err = s.ReleasePartition(ctxT(t), la)
	wantErr(t, err, events.ErrLeaseLost, "release from a stale revision")
	if err := s.ReleasePartition(ctxT(t), la2); err != nil {
		t.Fatalf("release: %v", err)
	}
	err = s.ReleasePartition(ctxT(t), la2)
	wantErr(t, err, events.ErrLeaseLost, "release twice")
	_, err = s.RenewPartition(ctxT(t), la2)
	wantErr(t, err, events.ErrLeaseLost, "renew a released lease")
	lb := acquirePart(t, s, p, "sb")
	if lb.Revision <= la2.Revision {
		t.Fatalf("revision %d after %d", lb.Revision, la2.Revision)
	}
}

// Spec: Lapse. A lease not renewed within its TTL is free by the reader's
// clock, and its owner's renewal then fails once another took it.
func testPartitionLapse(t *testing.T, h PartitionHarness) {
	aclock := NewClock(0)
	a := h.Open(t, aclock.Now)
	p := partitions(t)
	la := acquirePart(t, a, p, "sa")
	bclock := NewClock(0)
	b := h.Open(t, bclock.Now)
	_, err := b.AcquirePartition(ctxT(t), p, "sb", "runner-sb", TTL)
	wantErr(t, err, events.ErrPartitionBusy, "acquire before the lapse")
	bclock.Advance(TTL + time.Millisecond)
	ls, err := b.PartitionLeases(ctxT(t), p+1)
	if err != nil || ls[p].Session != "sa" || ls[p].Live {
		t.Fatalf("lapsed lease read as %+v (%v), want sa's, not live", ls[p], err)
	}
	lb := acquirePart(t, b, p, "sb")
	_, err = a.RenewPartition(ctxT(t), la)
	wantErr(t, err, events.ErrLeaseLost, "renew after another took the lapsed lease")
	_, err = a.AcquirePartition(ctxT(t), p, "sa", "runner-sa", TTL)
	wantErr(t, err, events.ErrPartitionBusy, "take it back while the new lease lives")
	if _, err := b.RenewPartition(ctxT(t), lb); err != nil {
		t.Fatalf("new owner renews: %v", err)
	}
}

// Its own session takes a live lease again: an owner whose renewal's
// outcome was unknown has lost only the revision.
func testPartitionSameSession(t *testing.T, h PartitionHarness) {
	s := h.Open(t, time.Now)
	p := partitions(t)
	l1 := acquirePart(t, s, p, "sa")
	l2 := acquirePart(t, s, p, "sa")
	if l2.Revision <= l1.Revision {
		t.Fatalf("revision %d after %d", l2.Revision, l1.Revision)
	}
	_, err := s.RenewPartition(ctxT(t), l1)
	wantErr(t, err, events.ErrLeaseLost, "renew the revision taken again")
}

// A listing has one entry per partition, free ones without a session.
func testPartitionList(t *testing.T, h PartitionHarness) {
	s := h.Open(t, time.Now)
	p := partitions(t)
	acquirePart(t, s, p, "sa")
	lc := acquirePart(t, s, p+2, "sc")
	if err := s.ReleasePartition(ctxT(t), lc); err != nil {
		t.Fatal(err)
	}
	ls, err := s.PartitionLeases(ctxT(t), p+partsPerTest)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(ls) != p+partsPerTest {
		t.Fatalf("%d leases for %d partitions", len(ls), p+partsPerTest)
	}
	for i, l := range ls {
		if l.Partition != i {
			t.Fatalf("entry %d is partition %d", i, l.Partition)
		}
	}
	if l := ls[p]; l.Session != "sa" || l.Owner != "runner-sa" || !l.Live || l.Revision == 0 || l.TTL != TTL {
		t.Fatalf("held partition listed as %+v", l)
	}
	for _, q := range []int{p + 1, p + 2, p + 3} {
		if l := ls[q]; l.Session != "" || l.Live {
			t.Fatalf("free partition %d listed as %+v", q, l)
		}
	}
	if ls[p+2].Revision <= lc.Revision {
		t.Fatalf("released partition's revision %d, want its delete's, after %d", ls[p+2].Revision, lc.Revision)
	}
}

// A partition lease is not a thread lease: the lease watch that runners
// follow for their threads never names one.
func testPartitionNotAThreadLease(t *testing.T, h PartitionHarness) {
	s := h.Open(t, time.Now)
	sl, ok := s.(events.SessionLeaser)
	if !ok {
		t.Skip("the handle watches no thread leases")
	}
	p := partitions(t)
	acquirePart(t, s, p, "sa")
	w, err := sl.WatchLeases(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel()
	for {
		u, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		if u.CaughtUp {
			return
		}
		if strings.Contains(u.Thread, "partition") || u.Session == "sa" {
			t.Fatalf("the lease watch reports a partition lease: %+v", u)
		}
	}
}

func testPartitionBadInput(t *testing.T, h PartitionHarness) {
	s := h.Open(t, time.Now)
	for _, tc := range []struct {
		p              int
		session, owner string
		ttl            time.Duration
	}{{-1, "s", "o", TTL}, {0, "", "o", TTL}, {0, "s", "", TTL}, {0, "s", "o", 0}} {
		_, err := s.AcquirePartition(ctxT(t), tc.p, tc.session, tc.owner, tc.ttl)
		wantErr(t, err, events.ErrInvalidEvent, "acquire with bad arguments")
	}
	_, err := s.PartitionLeases(ctxT(t), -1)
	wantErr(t, err, events.ErrInvalidEvent, "list -1 partitions")
	err = s.ReleasePartition(ctxT(t), events.PartitionLease{Partition: -1, Revision: 1})
	wantErr(t, err, events.ErrInvalidEvent, "release partition -1")
}
