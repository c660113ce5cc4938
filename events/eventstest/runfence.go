package eventstest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// RunRunFence runs the contract of the RUNFENCE layout
// ([events.Subjects.RunFence]) against a store h opens in it: claim markers
// and releases land on the run subject by compare-and-set on it, and a
// holder's consuming write ([events.FencedGuarded]) is one compare-and-set
// on the run subject expecting the holder's K, refused with
// [events.ErrThreadBusy] after a newer marker and with [events.ErrRunMoved]
// (and [events.ErrConflict]) after any other write. h.Subjects must say
// RunFence.
// Spec: README "Claims on the run subject (issue 23)", the protocol an
// implementation must follow (RUNFENCE); ClaimChain, FenceNewestClaim,
// HonestI1.
func RunRunFence(t *testing.T, h Harness) {
	if !h.Subjects.RunFence {
		t.Fatal("RunRunFence needs a harness whose Subjects say RunFence")
	}
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"ClaimOnRunSubject", testRunFenceClaimOnRunSubject},
		{"ConsumingAppendExpectsK", testRunFenceConsumingAppendExpectsK},
		{"StaleHolderBusy", testRunFenceStaleHolderBusy},
		{"MarkerByBodyBusy", testRunFenceMarkerByBodyBusy},
		{"ForgeryRunMoved", testRunFenceForgeryRunMoved},
		{"RetrySameMsgID", testRunFenceRetrySameMsgID},
		{"UnguardedFenceInvalid", testRunFenceUnguardedFenceInvalid},
		{"ClaimRacesHolder", testRunFenceClaimRacesHolder},
		{"SessionClaimRacesHolder", testRunFenceSessionClaimRacesHolder},
		{"ReleaseAt", testRunFenceReleaseAt},
		{"HeadAfterMarker", testRunFenceHeadAfterMarker},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// envAt returns the loaded event at seq.
func envAt(t *testing.T, s events.Loader, thread string, seq uint64) events.Envelope {
	t.Helper()
	for _, e := range load(t, s, thread) {
		if e.Seq == seq {
			return e
		}
	}
	t.Fatalf("no event at %d in %s", seq, thread)
	return events.Envelope{}
}

// The marker lands on the run subject, as its last message, expecting the
// run subject's last sequence before it (ClaimChain); the claim subject
// stays empty.
func testRunFenceClaimOnRunSubject(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	m := post(t, s, th, "m1", "one")
	c, envs := claim(t, s, th, "A", time.Now())
	if got := runLast(t, s, th); got != c.Seq {
		t.Fatalf("run subject's last %d, want the claim %d", got, c.Seq)
	}
	if got := lastSeq(t, s, th, events.KindClaim); got != 0 {
		t.Fatalf("claim subject's last %d, want none under RUNFENCE", got)
	}
	last := envs[len(envs)-1]
	if last.Seq != c.Seq || last.Type != events.TypeThreadClaimed || last.Kind != events.KindRun || last.Err != nil {
		t.Fatalf("claim's events end with %+v, want the marker at %d on the run subject", last, c.Seq)
	}
	if c.Prev != 0 || last.ExpectSeq != 0 || last.ExpectSubject != "" {
		t.Fatalf("first claim: prev %d, check %d on %q; want 0 on its own subject", c.Prev, last.ExpectSeq, last.ExpectSubject)
	}
	ack, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "a"), events.FencedGuarded(c, c.Seq))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := takeover(t, h, th)
	if b.Prev != ack.Seq || runLast(t, s, th) != b.Seq {
		t.Fatalf("takeover: prev %d (want the run start %d), run last %d (want %d)", b.Prev, ack.Seq, runLast(t, s, th), b.Seq)
	}
	if e := envAt(t, s, th, b.Seq); e.ExpectSeq != ack.Seq || e.ExpectSubject != "" || e.Kind != events.KindRun {
		t.Fatalf("takeover marker: check %d on %q, kind %s; want %d on its own run subject", e.ExpectSeq, e.ExpectSubject, e.Kind, ack.Seq)
	}
}

// A consuming append lands with K, the claim's sequence, and its stored
// check is ExpectSeq K with no -Subject: one compare-and-set on the run
// subject. K then moves with each ack.
func testRunFenceConsumingAppendExpectsK(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	m1 := post(t, s, th, "m1", "one")
	m2 := post(t, s, th, "m2", "two")
	c, _ := claim(t, s, th, "A", time.Now())
	k := c.Seq
	ack, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m1, "a"), events.FencedGuarded(c, k))
	if err != nil {
		t.Fatalf("run_started expecting K=%d: %v", k, err)
	}
	if got := runLast(t, s, th); got != ack.Seq {
		t.Fatalf("run subject at %d, want %d", got, ack.Seq)
	}
	e := envAt(t, s, th, ack.Seq)
	if e.ExpectSeq != k || e.ExpectSubject != "" || e.Kind != events.KindRun {
		t.Fatalf("stored run_started: check %d on %q; want %d with no -Subject", e.ExpectSeq, e.ExpectSubject, k)
	}
	k = ack.Seq
	ack, err = s.Append(ctxT(t), events.NewSteeringGiven(c, time.Now(), "r1", m2), events.FencedGuarded(c, k))
	if err != nil {
		t.Fatalf("steering_given expecting K=%d: %v", k, err)
	}
	if e := envAt(t, s, th, ack.Seq); e.ExpectSeq != k || e.ExpectSubject != "" {
		t.Fatalf("stored steering_given: check %d on %q; want %d", e.ExpectSeq, e.ExpectSubject, k)
	}
}

// A holder whose claim a newer one replaced is refused as busy (I4), with
// nothing written.
func testRunFenceStaleHolderBusy(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	m := post(t, s, th, "m1", "one")
	c, _ := claim(t, s, th, "A", time.Now())
	b, _ := takeover(t, h, th)
	_, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "a"), events.FencedGuarded(c, c.Seq))
	if !errors.Is(err, events.ErrThreadBusy) || errors.Is(err, events.ErrRunMoved) {
		t.Fatalf("stale holder's run_started after claim %d: %v, want ErrThreadBusy", b.Seq, err)
	}
	if got := runLast(t, s, th); got != b.Seq {
		t.Fatalf("a refused append wrote: run subject at %d, want %d", got, b.Seq)
	}
}

// A marker whose type header says otherwise (a forged or damaged one) is a
// marker by its body: the holder's write after it is refused as busy, the
// safe answer, on every store alike.
func testRunFenceMarkerByBodyBusy(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	m := post(t, s, th, "m1", "one")
	c, _ := claim(t, s, th, "A", time.Now())
	k := runLast(t, s, th)
	data, err := proto.Marshal(&eventspb.Event{Thread: th, Holder: "B",
		Body: &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{}}})
	if err != nil {
		t.Fatal(err)
	}
	h.PublishRaw(t, h.Subjects.Thread(th, events.KindRun), events.Header{events.HeaderType: {string(events.TypeRunOutput)}}, data)
	_, err = s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "a"), events.FencedGuarded(c, k))
	if !errors.Is(err, events.ErrThreadBusy) || errors.Is(err, events.ErrRunMoved) {
		t.Fatalf("the holder's start after a thread_claimed stored as run_output: %v, want ErrThreadBusy", err)
	}
}

// A forger that knows every sequence stores a consuming write under the
// holder's claim after the holder's read: the holder's write from that
// read is refused as ErrRunMoved (not busy: its marker is still the
// newest), and the message is consumed once (HonestI1).
func testRunFenceForgeryRunMoved(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	f := h.Open(t, time.Now)
	th := NewThread(t)
	m := post(t, s, th, "m1", "one")
	c, _ := claim(t, s, th, "A", time.Now())
	k := runLast(t, s, th) // the holder's read
	forged, err := f.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "forged", m, "evil"), events.FencedGuarded(c, k))
	if err != nil {
		t.Fatalf("forge: %v", err)
	}
	_, err = s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "a"), events.FencedGuarded(c, k))
	if !errors.Is(err, events.ErrRunMoved) || !errors.Is(err, events.ErrConflict) || errors.Is(err, events.ErrThreadBusy) {
		t.Fatalf("the holder's start after a forged one: %v, want ErrRunMoved and ErrConflict, not ErrThreadBusy", err)
	}
	if got := runLast(t, s, th); got != forged.Seq {
		t.Fatalf("a refused append wrote: run subject at %d, want %d", got, forged.Seq)
	}
	if n := len(consumers(load(t, s, th))[m]); n != 1 {
		t.Fatalf("message %d consumed %d times, want once (the forgery)", m, n)
	}
}

// A retry with the same msg id after the append landed, and after the
// holder wrote past it, returns the original ack.
func testRunFenceRetrySameMsgID(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	m := post(t, s, th, "m1", "one")
	c, _ := claim(t, s, th, "A", time.Now())
	ev := events.NewRunStarted(c, time.Now(), "r1", m, "a")
	chk := events.FencedGuarded(c, c.Seq)
	first, err := s.Append(ctxT(t), ev, chk, events.WithMsgID(th+":rs1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctxT(t), events.NewRunOutput(c, time.Now(), "r1", "out"), events.ExpectLast(first.Seq)); err != nil {
		t.Fatal(err)
	}
	again, err := s.Append(ctxT(t), ev, chk, events.WithMsgID(th+":rs1"))
	if err != nil || again.Seq != first.Seq || !again.Duplicate {
		t.Fatalf("retry of a run-fenced append that landed: %+v %v, want a duplicate of %d", again, err, first.Seq)
	}
}

// The unguarded fence has no run-subject sequence to expect: refused
// before any I/O.
func testRunFenceUnguardedFenceInvalid(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	m := post(t, s, th, "m1", "one")
	c, _ := claim(t, s, th, "A", time.Now())
	_, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "a"), events.Fenced(c))
	if !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("unguarded Fenced under RUNFENCE: %v, want ErrInvalidEvent", err)
	}
	if got := runLast(t, s, th); got != c.Seq {
		t.Fatalf("a refused append wrote: run subject at %d, want %d", got, c.Seq)
	}
}

// racing wraps a claimant's store: right after its first read of the run
// subject's last sequence, hook runs (the holder writes), so the claim's
// compare-and-set from that read is refused.
type racing struct {
	events.Store
	once    sync.Once
	hook    func()
	refused int // appends refused with ErrConflict
}

func (r *racing) LastSeq(ctx context.Context, thread string, k events.Kind) (uint64, error) {
	n, err := r.Store.LastSeq(ctx, thread, k)
	if k == events.KindRun {
		r.once.Do(r.hook)
	}
	return n, err
}

func (r *racing) Append(ctx context.Context, ev *eventspb.Event, chk events.Check, opts ...events.AppendOption) (events.Ack, error) {
	ack, err := r.Store.Append(ctx, ev, chk, opts...)
	if errors.Is(err, events.ErrConflict) {
		r.refused++
	}
	return ack, err
}

// raceSetup claims th for A and returns a hook in which A writes its run
// start, and where that start's ack is kept.
func raceSetup(t *testing.T, s events.Store, th string) (events.Claim, func(), *events.Ack) {
	t.Helper()
	m := post(t, s, th, "m1", "one")
	c, _ := claim(t, s, th, "A", time.Now())
	var ack events.Ack
	hook := func() {
		var err error
		if ack, err = s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "a"), events.FencedGuarded(c, c.Seq)); err != nil {
			t.Errorf("holder's write in the race: %v", err)
		}
	}
	return c, hook, &ack
}

// checkRaced checks that the claimant's marker b, whose compare-and-set
// was refused at least once by the holder's write, landed after it.
func checkRaced(t *testing.T, r *racing, b events.Claim, held events.Ack) {
	t.Helper()
	if held.Seq == 0 {
		t.Fatal("the holder's write never ran")
	}
	if r.refused < 2 {
		// The first refusal is appendMarker's guess of an empty subject.
		t.Fatalf("%d refused claim attempts, want the holder's write to refuse one", r.refused)
	}
	if b.Seq <= held.Seq || b.Prev != held.Seq {
		t.Fatalf("claim %d (prev %d), want it after the holder's write %d, expecting it", b.Seq, b.Prev, held.Seq)
	}
}

// A claim racing the holder's write is refused (its compare-and-set on
// the run subject), read again while the lease is the claimant's, and
// lands (spec: TestRunFence_claimRacesTheHolder).
func testRunFenceClaimRacesHolder(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	_, hook, held := raceSetup(t, s, th)
	later := time.Now().Add(2 * TTL)
	r := &racing{Store: h.Open(t, func() time.Time { return later }), hook: hook}
	b, _, err := events.AcquireClaim(ctxT(t), r, th, "B", TTL, later)
	if err != nil {
		t.Fatalf("claim racing the holder: %v", err)
	}
	checkRaced(t, r, b, *held)
}

// As testRunFenceClaimRacesHolder, through a runner session.
func testRunFenceSessionClaimRacesHolder(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	c, hook, held := raceSetup(t, s, th)
	// A gives its lease up (its marker stays): B may take it at once.
	if err := s.ReleaseLease(ctxT(t), c.Lease); err != nil {
		t.Fatal(err)
	}
	r := &racing{Store: h.Open(t, time.Now), hook: hook}
	sess, err := r.OpenSession(ctxT(t), "B", TTL)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := events.AcquireSessionClaim(ctxT(t), r, sess, th, "B", 0, time.Now())
	if err != nil {
		t.Fatalf("session claim racing the holder: %v", err)
	}
	checkRaced(t, r, b, *held)
}

// A release expects the holder's K on the run subject and lands there; one
// from a stale K writes nothing and returns nil.
func testRunFenceReleaseAt(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	m := post(t, s, th, "m1", "one")
	c, _ := claim(t, s, th, "A", time.Now())
	ack, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "a"), events.FencedGuarded(c, c.Seq))
	if err != nil {
		t.Fatal(err)
	}
	// Stale: K is the claim, but the run start moved the run subject.
	if err := events.ReleaseMarkerAt(ctxT(t), s, c, c.Seq, "done", time.Now()); err != nil {
		t.Fatalf("stale release: %v, want nil", err)
	}
	if got := runLast(t, s, th); got != ack.Seq {
		t.Fatalf("a stale release wrote: run subject at %d, want %d", got, ack.Seq)
	}
	if err := events.ReleaseMarkerAt(ctxT(t), s, c, ack.Seq, "done", time.Now()); err != nil {
		t.Fatal(err)
	}
	rel := runLast(t, s, th)
	e := envAt(t, s, th, rel)
	if rel <= ack.Seq || e.Type != events.TypeThreadReleased || e.Kind != events.KindRun || e.ExpectSeq != ack.Seq || e.ExpectSubject != "" {
		t.Fatalf("release at %d: %s on %s expecting %d on %q; want thread_released on the run subject expecting %d",
			rel, e.Type, e.Kind, e.ExpectSeq, e.ExpectSubject, ack.Seq)
	}
	if got := lastSeq(t, s, th, events.KindClaim); got != 0 {
		t.Fatalf("claim subject's last %d, want none", got)
	}
}

// A marker on the run subject ends no run: the head still names the run
// the last run event left active, and LastRunSeq is the marker.
func testRunFenceHeadAfterMarker(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	hr, ok := s.(events.HeadReader)
	if !ok {
		t.Skip("no HeadReader")
	}
	th := NewThread(t)
	m := post(t, s, th, "m1", "one")
	c, _ := claim(t, s, th, "A", time.Now())
	if _, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "a"), events.FencedGuarded(c, c.Seq)); err != nil {
		t.Fatal(err)
	}
	b, _ := takeover(t, h, th)
	head, err := hr.ThreadHead(ctxT(t), th, "")
	if err != nil {
		t.Fatal(err)
	}
	if head.LastRunSeq != b.Seq || head.ActiveRun != "r1" {
		t.Fatalf("head after a takeover marker: last run seq %d, active %q; want %d, r1", head.LastRunSeq, head.ActiveRun, b.Seq)
	}
	// Markers in a row: B releases, C claims; r1 is still the run active.
	bs := h.Open(t, func() time.Time { return time.Now().Add(2 * TTL) })
	if err := events.ReleaseClaimAt(ctxT(t), bs, b, b.Seq, "done", time.Now()); err != nil {
		t.Fatal(err)
	}
	cs := h.Open(t, time.Now)
	c2, _ := claim(t, cs, th, "C", time.Now())
	if head, err = hr.ThreadHead(ctxT(t), th, ""); err != nil {
		t.Fatal(err)
	}
	if head.LastRunSeq != c2.Seq || head.ActiveRun != "r1" {
		t.Fatalf("head after release and claim: last run seq %d, active %q; want %d, r1", head.LastRunSeq, head.ActiveRun, c2.Seq)
	}
	if c2.Prev <= b.Seq {
		t.Fatalf("claim after the release expects %d, want the release after %d", c2.Prev, b.Seq)
	}
}
