package owner_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/runner/owner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
)

const parts = 16

// A lone runner reads the leases, then takes every partition and follows it.
func TestCore_start(t *testing.T) {
	w := newGroup(t, parts)
	a := w.add("a", nil)
	if rd := a.seen[0]; !rd.Read || len(rd.Acquire) != 0 {
		t.Fatalf("first Ready %+v: want a read and no acquisition before it", rd)
	}
	w.settle()
	if got := a.since(0, acquires); len(got) != parts {
		t.Fatalf("acquired %v, want all %d", got, parts)
	}
	if got := a.since(0, follows); len(got) != parts {
		t.Fatalf("follows %v, want all %d", got, parts)
	}
	w.settled()
	if rd := a.step(owner.Tick{}); !rd.Wake.After(a.clock.Now()) {
		t.Fatalf("wake %v is not ahead of now %v", rd.Wake, a.clock.Now())
	}
}

// A runner takes nothing before its lease watch caught up: it would think
// itself alone.
func TestCore_waitsForMembers(t *testing.T) {
	w := newGroup(t, parts)
	a := w.addQuiet("a", nil)
	a.settle()
	a.step(owner.Tick{})
	a.settle()
	if got := a.since(0, acquires); len(got) != 0 {
		t.Fatalf("acquired %v before Members", got)
	}
	a.step(owner.Members{Live: []string{"a"}})
	a.settle()
	w.settled()
}

// A join: the owner drains exactly the newcomer's share, releases each only
// once its threads were handed over, and the newcomer takes them at its
// next read.
func TestCore_join(t *testing.T) {
	w := newGroup(t, parts)
	a := w.add("a", nil)
	w.settle()
	a.holdDrains = true
	from := len(a.seen)
	b := w.add("b", a.clock)
	share := assignedTo(parts, []string{"a", "b"}, "b")
	if got := a.since(from, drains); !slices.Equal(got, share) {
		t.Fatalf("a drained %v, want b's share %v", got, share)
	}
	for _, p := range share {
		if a.core.Claims(p) {
			t.Fatalf("a still claims %d while draining it", p)
		}
	}
	w.settle()
	if got := a.since(from, releases); len(got) != 0 {
		t.Fatalf("a released %v before its threads were handed over", got)
	}
	if got := b.core.Owned(); len(got) != 0 {
		t.Fatalf("b owns %v while a holds them", got)
	}
	if got := a.since(from, unfollows); len(got) != 0 {
		t.Fatalf("a stopped following %v before its threads were handed over", got)
	}
	a.drained()
	if got := a.since(from, releases); !slices.Equal(got, share) {
		t.Fatalf("a released %v, want %v", got, share)
	}
	if got := a.since(from, unfollows); !slices.Equal(got, share) {
		t.Fatalf("a stopped following %v, want %v", got, share)
	}
	w.run(ttl)
	w.settled()
	if got := b.since(0, follows); !slices.Equal(got, share) {
		t.Fatalf("b follows %v, want %v", got, share)
	}
}

// A graceful leave drains and releases everything, ends with Done, and the
// others take the partitions at their next read.
func TestCore_leave(t *testing.T) {
	w := newGroup(t, parts)
	a := w.add("a", nil)
	b := w.add("b", a.clock)
	w.run(ttl)
	w.settled()
	held := b.core.Owned()
	from := len(b.seen)
	rd := b.step(owner.Leave{})
	if !slices.Equal(rd.Drain, held) || rd.Done {
		t.Fatalf("leave: %+v, want drains of %v and not done", rd, held)
	}
	b.settle()
	if got := b.since(from, releases); !slices.Equal(got, held) {
		t.Fatalf("released %v, want %v", got, held)
	}
	if last := b.seen[len(b.seen)-1]; !last.Done || !last.Wake.IsZero() {
		t.Fatalf("after the releases: %+v, want done with no timer", last)
	}
	w.nodes = w.nodes[:1]
	w.members()
	w.run(ttl / 3)
	w.settled()
}

// A runner that freezes loses its partitions once their leases lapse, not
// before; the others take them.
func TestCore_lapse(t *testing.T) {
	w := newGroup(t, parts)
	a := w.add("a", nil)
	b := w.add("b", a.clock)
	w.run(ttl)
	bs := b.core.Owned()
	b.frozen = true
	w.members() // b's session lapsed in a's lease watch
	from := len(a.seen)
	w.tick(ttl / 2)
	if got := a.since(from, acquires); len(got) != 0 {
		t.Fatalf("a acquired %v before b's leases lapsed", got)
	}
	w.run(ttl)
	if got := a.since(from, acquires); !slices.Equal(got, bs) {
		t.Fatalf("a acquired %v, want b's %v", got, bs)
	}
	w.nodes = w.nodes[:1]
	w.settled()
}

// A runner that comes back after a freeze drains what it held at once, with
// no release (its leases are others' now), then rejoins with a new session
// and gets its share back.
func TestCore_comeBack(t *testing.T) {
	w := newGroup(t, parts)
	a := w.add("a", nil)
	b := w.add("b", a.clock)
	w.run(ttl)
	bs := b.core.Owned()
	b.frozen = true
	w.members()
	w.run(2 * ttl)
	// Thawed: its first step sees its leases expired by its own clock.
	b.frozen = false
	from := len(b.seen)
	b.step(owner.Tick{})
	if got := b.since(from, drains); !slices.Equal(got, bs) {
		t.Fatalf("thawed b drained %v, want %v", got, bs)
	}
	b.settle()
	if got := b.since(from, releases); len(got) != 0 {
		t.Fatalf("b released leases it lost: %v", got)
	}
	if st := b.core.Stats(); st.Lapsed != int64(len(bs)) {
		t.Fatalf("lapsed %d, want %d", st.Lapsed, len(bs))
	}
	// Its renewal fails too (SessionLost from the runner); a new session.
	b.step(owner.SessionLost{})
	b.sess = "b2"
	b.step(owner.SessionOpened{ID: "b2"})
	w.members()
	w.run(2 * ttl)
	w.settled()
}

// Two runners both believe they own a partition: b, whose clock runs ahead,
// takes a's lease as lapsed while a, behind, still claims it. The fence
// keeps them safe: a's claim of a thread there is refused once b claims it.
// a stops claiming when its renewal is refused, and does not release b's
// lease.
func TestCore_bothBelieve(t *testing.T) {
	w := newGroup(t, 1)
	a := w.add("a", nil)
	w.settle()
	if !a.core.Claims(0) {
		t.Fatal("a does not own the partition")
	}
	ctx := context.Background()
	astore := w.log.Open(memstoreConfig(a.clock))
	const th = "t1"
	post, err := astore.Post(ctx, th, postMsg("m1"))
	if err != nil {
		t.Fatal(err)
	}
	ca, _, err := events.AcquireClaim(ctx, astore, th, "a/1", ttl, a.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	// b's clock is ahead by more than the TTL; to b, a's session is gone.
	bclock := eventstest.NewClock(0)
	bclock.Advance(a.clock.Now().Sub(eventstest.Epoch) + ttl + time.Second)
	b := w.addQuiet("b", bclock)
	b.step(owner.Members{Live: []string{"b"}})
	w.settle()
	if !a.core.Claims(0) || !b.core.Claims(0) {
		t.Fatalf("a claims %v, b claims %v: want both", a.core.Claims(0), b.core.Claims(0))
	}
	bstore := w.log.Open(memstoreConfig(bclock))
	cb, _, err := events.AcquireClaim(ctx, bstore, th, "b/1", ttl, bclock.Now())
	if err != nil {
		t.Fatalf("b claims the thread: %v", err)
	}
	// Spec: StartFenced. a's start is refused; b's lands.
	_, err = astore.Append(ctx, events.NewRunStarted(ca, a.clock.Now(), "run-a", post.Seq, "echo"), events.Fenced(ca))
	if !errors.Is(err, events.ErrThreadBusy) {
		t.Fatalf("a's run_started: %v, want ErrThreadBusy", err)
	}
	if _, err := bstore.Append(ctx, events.NewRunStarted(cb, bclock.Now(), "run-b", post.Seq, "echo"), events.Fenced(cb)); err != nil {
		t.Fatalf("b's run_started: %v", err)
	}
	// a renews: refused, it loses the partition and releases nothing.
	from := len(a.seen)
	a.step(owner.Tick{})
	a.clock.Advance(ttl / 3)
	a.step(owner.Tick{})
	a.settle()
	if a.core.Claims(0) || !b.core.Claims(0) {
		t.Fatalf("after a's renewal: a claims %v, b claims %v", a.core.Claims(0), b.core.Claims(0))
	}
	if got := a.since(from, drains); !slices.Equal(got, []int{0}) {
		t.Fatalf("a drained %v", got)
	}
	if got := a.since(from, releases); len(got) != 0 {
		t.Fatalf("a released %v, a lease that is b's", got)
	}
}

// A lost session drains every partition and releases its leases, which
// name that session.
func TestCore_sessionLost(t *testing.T) {
	w := newGroup(t, parts)
	a := w.add("a", nil)
	w.settle()
	from := len(a.seen)
	rd := a.step(owner.SessionLost{})
	if len(rd.Drain) != parts || len(rd.Acquire) != 0 {
		t.Fatalf("session lost: %+v", rd)
	}
	a.settle()
	if got := a.since(from, releases); len(got) != parts {
		t.Fatalf("released %v", got)
	}
	if f := a.core.Following(); len(f) != 0 || a.core.Follows(0) {
		t.Fatalf("still follows %v", f)
	}
}

// A refused acquisition waits for the next read instead of retrying at
// every step.
func TestCore_refusedWaitsForRead(t *testing.T) {
	x, y := "a", "b"
	if owner.Assign(1, []string{x, y})[0] != x {
		x, y = y, x
	}
	w := newGroup(t, 1)
	b := w.addQuiet(y, nil)
	b.step(owner.Members{Live: []string{x, y}})
	b.settle() // b read the lease free, but it falls to x
	a := w.addQuiet(x, b.clock)
	a.step(owner.Members{Live: []string{x}})
	a.settle()
	if !a.core.Claims(0) {
		t.Fatal("x does not own the partition")
	}
	from := len(b.seen)
	b.step(owner.Members{Live: []string{y}}) // x's session seems gone
	b.settle()
	for range 5 {
		b.step(owner.Tick{})
	}
	if st := b.core.Stats(); st.Refused != 1 || st.Acquired != 0 {
		t.Fatalf("stats %+v: want one refusal", st)
	}
	if got := b.since(from, acquires); len(got) != 1 {
		t.Fatalf("acquisitions %v: want one, on the read the stale view made", got)
	}
}

// A leave that comes while acquisitions are in flight gives those back too
// once they report, and ends with nothing held.
func TestCore_leaveWhileAcquiring(t *testing.T) {
	w := newGroup(t, parts)
	a := w.addQuiet("a", nil)
	a.settle() // the first read
	a.step(owner.Members{Live: []string{"a"}})
	inFlight := a.since(0, acquires)
	if len(inFlight) == 0 {
		t.Fatal("no acquisition in flight")
	}
	from := len(a.seen)
	if rd := a.step(owner.Leave{}); rd.Done {
		t.Fatal("done with acquisitions in flight")
	}
	a.settle()
	if got := a.since(from, releases); !slices.Equal(got, inFlight) {
		t.Fatalf("released %v, want the acquired %v", got, inFlight)
	}
	if last := a.seen[len(a.seen)-1]; !last.Done || len(a.core.Owned()) != 0 {
		t.Fatalf("after the leave: %+v, owns %v", last, a.core.Owned())
	}
	ls, err := a.store.PartitionLeases(context.Background(), parts)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.Live {
			t.Fatalf("lease %+v left behind", l)
		}
	}
}

// An acquisition in flight when the session is lost and another opens
// brings back a lease naming the lost session: it is handed over and
// released, and the partition taken again under the new session.
func TestCore_sessionLostWhileAcquiring(t *testing.T) {
	w := newGroup(t, parts)
	a := w.addQuiet("a", nil)
	a.settle() // the first read
	a.step(owner.Members{Live: []string{"a"}})
	if len(a.since(0, acquires)) == 0 {
		t.Fatal("no acquisition in flight")
	}
	// The acquisitions were made under "a"; their reports come after the
	// session was lost and "a2" opened.
	a.step(owner.SessionLost{})
	a.sess = "a2"
	a.step(owner.SessionOpened{ID: "a2"})
	a.step(owner.Members{Live: []string{"a2"}})
	a.settle()
	w.settled()
}
