package sched

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
)

const ttl = 10 * time.Second

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// harness drives one scheduler, with a fixed seed and a clock it moves.
type harness struct {
	t   *testing.T
	s   *Scheduler
	now time.Time
	seq uint64 // the last claim marker handed out
}

func newHarness(t *testing.T, session string, work bool) *harness {
	t.Helper()
	s := New(Config{
		ClaimTTL:    ttl,
		MaxClaiming: 4,
		Work:        work,
		Seed:        1,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, events.Session{ID: session, TTL: ttl})
	return &harness{t: t, s: s, now: t0}
}

func (h *harness) step(ev Event) Ready { return h.s.Step(Input{Now: h.now, Event: ev}) }

// after moves the clock by d and ticks.
func (h *harness) after(d time.Duration) Ready {
	h.now = h.now.Add(d)
	return h.step(Tick{})
}

// live tells the scheduler that sessions are live, and that the lease
// watch caught up.
func (h *harness) live(sessions ...string) {
	for _, s := range sessions {
		h.step(LeaseChanged{events.LeaseUpdate{Session: s, Present: true}})
	}
	h.step(LeaseChanged{events.LeaseUpdate{CaughtUp: true}})
}

func (h *harness) lease(th, session string) Ready {
	return h.step(LeaseChanged{events.LeaseUpdate{Thread: th, Session: session, Present: session != ""}})
}

// hold claims th and spawns its actor, returning the spawn's Ready.
func (h *harness) hold(th string, ready Ready) Ready {
	h.t.Helper()
	if len(ready.Claims) != 1 || ready.Claims[0].Thread != th {
		h.t.Fatalf("want a claim of %s, got %+v", th, ready)
	}
	h.seq++
	c := events.Claim{Thread: th, Seq: h.seq, Lease: events.Lease{Thread: th, Session: ready.Claims[0].Session.ID}}
	rd := h.step(ClaimDone{Thread: th, Claim: c})
	if rd.Spawn == nil {
		h.t.Fatalf("want a spawn of %s, got %+v", th, rd)
	}
	return h.step(Spawned{Spawn: *rd.Spawn})
}

func post(th string, seq uint64) Routed {
	return Routed{events.Envelope{Seq: seq, Thread: th, Kind: events.KindPosted, Type: events.TypeMessagePosted}}
}

func claimed(rd Ready) []string {
	var out []string
	for _, c := range rd.Claims {
		out = append(out, c.Thread)
	}
	return out
}

// ack returns a wake-up's ack that counts its calls in *n.
func ack(n *int) func() { return func() { *n++ } }

func runAcks(rd Ready) {
	for _, a := range rd.Acks {
		a()
	}
}

// Without a work source, a free thread's post falls to one live session by
// hash: exactly one of two runners claims it, and the other looks again
// after [ClaimTTL, 2*ClaimTTL].
func TestScheduler_route_hashOwnership(t *testing.T) {
	a, b := newHarness(t, "sa", false), newHarness(t, "sb", false)
	a.live("sa", "sb")
	b.live("sa", "sb")
	for i := range 200 {
		th := fmt.Sprintf("t%d", i)
		ra, rb := a.step(post(th, uint64(i+1))), b.step(post(th, uint64(i+1)))
		na, nb := len(ra.Claims), len(rb.Claims)
		if na+nb != 1 {
			t.Fatalf("%s: claims a=%d b=%d, want exactly one", th, na, nb)
		}
		other := ra
		if na == 1 {
			other = rb
			a.hold(th, ra)
		} else {
			b.hold(th, rb)
		}
		if len(other.Timers) != 1 || other.Timers[0].Kind != TimerRecheck {
			t.Fatalf("%s: the other runner armed %+v, want a recheck", th, other.Timers)
		}
		if d := other.Timers[0].At.Sub(t0); d < ttl || d > 2*ttl {
			t.Fatalf("%s: recheck after %s, want within [TTL, 2TTL]", th, d)
		}
	}
}

// With a work source, the follow claims nothing: the wake-up does, and its
// ack is given only once a claim made after it holds the thread.
func TestScheduler_woken_ackAfterClaim(t *testing.T) {
	h := newHarness(t, "s1", true)
	h.live("s1")
	if rd := h.step(post("t", 1)); len(rd.Claims)+len(rd.Peeks) != 0 {
		t.Fatalf("a post with a work source started %+v", rd)
	}
	var n int
	rd := h.step(Woken{Thread: "t", Ack: ack(&n)})
	if len(rd.Acks) != 0 {
		t.Fatal("acknowledged before the claim")
	}
	// A second wake-up while the claim is in flight stays parked: its
	// post may have landed after the claim's load (issue 21).
	var late int
	h.step(Woken{Thread: "t", Ack: ack(&late)})
	runAcks(h.hold("t", rd))
	if n != 1 || late != 0 {
		t.Fatalf("acks: before the claim %d (want 1), during it %d (want 0)", n, late)
	}
	if got := h.s.Stats().KeptParked; got != 1 {
		t.Fatalf("KeptParked = %d, want 1", got)
	}
	// The holder lets go: the parked wake-up has the thread read, and a
	// read that finds nothing acknowledges it.
	rd = h.step(Terminated{Thread: "t", Clean: true, Released: true, Checked: 1})
	if len(rd.Peeks) != 1 {
		t.Fatalf("after the release, want a peek, got %+v", rd)
	}
	runAcks(h.step(PeekDone{Thread: "t"}))
	if late != 1 {
		t.Fatalf("the parked ack ran %d times, want 1", late)
	}
}

// A wake-up for a thread another live session holds is parked until that
// lease goes; then the thread is read.
func TestScheduler_woken_parkedUntilHolderLetsGo(t *testing.T) {
	h := newHarness(t, "s1", true)
	h.live("s1", "s2")
	h.lease("t", "s2")
	var n int
	if rd := h.step(Woken{Thread: "t", Ack: ack(&n)}); len(rd.Claims)+len(rd.Peeks) != 0 {
		t.Fatalf("claimed a thread another live runner holds: %+v", rd)
	}
	rd := h.lease("t", "")
	if len(rd.Peeks) != 1 {
		t.Fatalf("after the release, want a peek, got %+v", rd)
	}
	rd = h.step(PeekDone{Thread: "t", Work: true})
	if got := claimed(rd); len(got) != 1 {
		t.Fatalf("a peek that found work claims; got %+v", rd)
	}
}

// Want levels: a stronger want replaces a weaker one for a queued thread,
// and work asked for during a peek is done after it.
func TestScheduler_enqueue_wantLevels(t *testing.T) {
	h := newHarness(t, "", false) // no session: everything queues
	h.step(LookAt{Thread: "t"})
	h.step(Woken{Thread: "t", Ack: func() {}})
	rd := h.step(SessionOpened{Session: events.Session{ID: "s1"}})
	if len(rd.Peeks) != 0 || len(rd.Claims) != 1 {
		t.Fatalf("a peek then a post: want one claim, got %+v", rd)
	}

	h = newHarness(t, "s1", false)
	rd = h.step(LookAt{Thread: "u"})
	if len(rd.Peeks) != 1 {
		t.Fatalf("want a peek, got %+v", rd)
	}
	h.step(Woken{Thread: "u", Ack: func() {}}) // during the peek
	rd = h.step(PeekDone{Thread: "u"})
	if len(rd.Claims) != 1 {
		t.Fatalf("work asked for during a peek is lost: %+v", rd)
	}
}

// A post routed while a peek reads may have been missed by it: claim.
func TestScheduler_peeked_overtakenByPost(t *testing.T) {
	h := newHarness(t, "s1", true)
	h.step(LookAt{Thread: "t"})
	h.step(post("t", 5))
	if rd := h.step(PeekDone{Thread: "t"}); len(rd.Claims) != 1 {
		t.Fatalf("want a claim, got %+v", rd)
	}
}

// A claim that fails is retried after a jittered, doubling delay, and the
// thread is looked at again all the same; a busy one only looks again.
func TestScheduler_claimed_retry(t *testing.T) {
	h := newHarness(t, "s1", false)
	rd := h.step(Woken{Thread: "t", Ack: func() {}})
	for i, base := range []time.Duration{ClaimRetryDelay, 2 * ClaimRetryDelay, 4 * ClaimRetryDelay} {
		rd = h.step(ClaimDone{Thread: "t", Err: errors.New("boom")})
		var retry *Timer
		for _, tm := range rd.Timers {
			if tm.Kind == TimerRetry {
				retry = &tm
			}
		}
		if retry == nil || retry.Want != WantClaim {
			t.Fatalf("failure %d: no retry for a claim: %+v", i, rd.Timers)
		}
		if d := retry.At.Sub(h.now); d < base/2 || d > base {
			t.Fatalf("failure %d: retry in %s, want within [%s, %s]", i, d, base/2, base)
		}
		rd = h.after(base)
		if len(rd.Claims) != 1 {
			t.Fatalf("failure %d: retry claimed nothing: %+v", i, rd)
		}
	}
	rd = h.step(ClaimDone{Thread: "t", Err: fmt.Errorf("held: %w", events.ErrThreadBusy)})
	if len(rd.Timers) != 0 { // the recheck from the first failure is pending
		t.Fatalf("busy armed %+v", rd.Timers)
	}
	if st := h.s.Stats(); st.ClaimsBusy != 1 || st.RechecksDue != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A thread actor that stops without giving its claim up (a panic) is
// claimed again after HandoverDelay, not at once.
func TestScheduler_terminated_panicHandover(t *testing.T) {
	h := newHarness(t, "s1", false)
	h.hold("t", h.step(Woken{Thread: "t", Ack: func() {}}))
	rd := h.step(Terminated{Thread: "t"})
	if len(rd.Claims) != 0 || len(rd.Timers) != 1 || rd.Timers[0].Kind != TimerHandover {
		t.Fatalf("want a handover timer, got %+v", rd)
	}
	if rd.Wake != t0.Add(HandoverDelay) {
		t.Fatalf("Wake = %v, want %v", rd.Wake, t0.Add(HandoverDelay))
	}
	if rd := h.after(HandoverDelay / 2); len(rd.Claims) != 0 {
		t.Fatal("claimed before the handover delay")
	}
	if rd := h.after(HandoverDelay / 2); len(rd.Claims) != 1 {
		t.Fatalf("want a claim at the handover, got %+v", rd)
	}
	if h.s.Stats().Panics != 1 {
		t.Fatal("panic not counted")
	}
}

// The ends of a clean claim: claim again for work that came as it
// released, look again if the release was not stored, nothing otherwise.
func TestScheduler_terminated_clean(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ended      Terminated
		post       bool // a post routed to the actor after its release looked
		wantClaim  bool
		wantRechck bool
	}{
		{name: "released", ended: Terminated{Clean: true, Released: true}},
		{name: "rework", ended: Terminated{Clean: true, Released: true, Rework: true}, wantClaim: true},
		{name: "post after release", ended: Terminated{Clean: true, Released: true}, post: true, wantClaim: true},
		{name: "fenced", ended: Terminated{Clean: true}, wantRechck: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "s1", false)
			h.hold("t", h.step(Woken{Thread: "t", Ack: func() {}}))
			if tc.post {
				if rd := h.step(post("t", 9)); !rd.Forward {
					t.Fatal("a held thread's post was not forwarded")
				}
			}
			tc.ended.Thread = "t"
			rd := h.step(tc.ended)
			if got := len(rd.Claims) == 1; got != tc.wantClaim {
				t.Fatalf("claims %+v, want claim %v", rd.Claims, tc.wantClaim)
			}
			if got := len(rd.Timers) == 1 && rd.Timers[0].Kind == TimerRecheck; got != tc.wantRechck {
				t.Fatalf("timers %+v, want recheck %v", rd.Timers, tc.wantRechck)
			}
		})
	}
}

// Orphans: when a session lapses, the live runner its threads fall to
// probes them at once; the others look again later and probe only if the
// lease is still under the dead session.
func TestScheduler_leaseChanged_orphans(t *testing.T) {
	for _, stillDead := range []bool{true, false} {
		t.Run(fmt.Sprintf("stillDead=%v", stillDead), func(t *testing.T) {
			a, b := newHarness(t, "sa", false), newHarness(t, "sb", false)
			for _, h := range []*harness{a, b} {
				h.live("sa", "sb", "dead")
				h.lease("t", "dead")
			}
			lapse := LeaseChanged{events.LeaseUpdate{Session: "dead"}}
			ra, rb := a.step(lapse), b.step(lapse)
			other, ro := b, rb
			if len(rb.Claims) == 1 {
				other, ro = a, ra
			}
			if len(ra.Claims)+len(rb.Claims) != 1 {
				t.Fatalf("probes a=%v b=%v, want one", claimed(ra), claimed(rb))
			}
			if len(ro.Timers) != 1 || ro.Timers[0].Kind != TimerOrphan || ro.Timers[0].Dead != "dead" {
				t.Fatalf("the other armed %+v, want an orphan check", ro.Timers)
			}
			if !stillDead {
				other.lease("t", "") // its owner took it up and let go
			}
			rd := other.after(OrphanRecheck * ttl)
			if got := len(rd.Claims) == 1; got != stillDead {
				t.Fatalf("orphan check claims %v, want %v", claimed(rd), stillDead)
			}
		})
	}
}

// Skipped threads: a post left to another live holder is read again,
// later, once that holder releases the thread.
func TestScheduler_route_skippedReadAfterRelease(t *testing.T) {
	h := newHarness(t, "s1", false)
	h.live("s1", "s2")
	h.lease("t", "s2")
	if rd := h.step(post("t", 3)); len(rd.Claims)+len(rd.Timers) != 0 {
		t.Fatalf("acted on a post a live holder has: %+v", rd)
	}
	rd := h.lease("t", "")
	if len(rd.Timers) != 1 || rd.Timers[0].Kind != TimerRecheck {
		t.Fatalf("release of a skipped thread armed %+v, want a recheck", rd.Timers)
	}
	if rd := h.after(OrphanRecheck * ttl); len(rd.Peeks) != 1 {
		t.Fatalf("recheck of a free thread: want a peek, got %+v", rd)
	}
	if h.s.Stats().Rechecks != 1 {
		t.Fatal("recheck not counted")
	}
}

// A lease of this runner's session with no claim here (a claim that failed
// after taking it) is probed at the recheck.
func TestScheduler_leaseChanged_ownLeaseNoClaim(t *testing.T) {
	h := newHarness(t, "s1", false)
	h.live("s1")
	rd := h.lease("t", "s1")
	if len(rd.Timers) != 1 || rd.Timers[0].Kind != TimerRecheck {
		t.Fatalf("want a recheck, got %+v", rd.Timers)
	}
	if rd := h.after(OrphanRecheck * ttl); len(rd.Claims) != 1 {
		t.Fatalf("want a probe, got %+v", rd)
	}
}

// A lost session stops its actors and every claim until a new one opens;
// a claim that ends under the lost session is made again under the new.
func TestScheduler_session_lostAndOpened(t *testing.T) {
	h := newHarness(t, "s1", false)
	h.hold("held", h.step(Woken{Thread: "held", Ack: func() {}}))
	inflight := h.step(Woken{Thread: "late", Ack: func() {}})
	rd := h.step(SessionLost{ID: "s1"})
	if len(rd.SessionGone) != 1 || rd.SessionGone[0] != "held" {
		t.Fatalf("SessionGone = %v", rd.SessionGone)
	}
	c := events.Claim{Thread: "late", Seq: 7, Lease: events.Lease{Session: inflight.Claims[0].Session.ID}}
	if rd := h.step(ClaimDone{Thread: "late", Claim: c}); rd.Spawn != nil || len(rd.Claims) != 0 {
		t.Fatalf("with no session: %+v", rd)
	}
	if rd := h.step(Terminated{Thread: "held", Clean: true}); len(rd.Claims) != 0 {
		t.Fatalf("claimed with no session: %+v", rd)
	}
	rd = h.step(SessionOpened{Session: events.Session{ID: "s2"}})
	if got := claimed(rd); len(got) != 2 {
		t.Fatalf("after the new session, claims %v, want both threads", got)
	}
	for _, c := range rd.Claims {
		if c.Session.ID != "s2" {
			t.Fatalf("claim under %q", c.Session.ID)
		}
	}
}

// A drain stops every actor, starts nothing, leaves wake-ups unacknowledged
// for another runner and is done when nothing is held or in flight.
func TestScheduler_drain(t *testing.T) {
	h := newHarness(t, "s1", true)
	h.hold("a", h.step(Woken{Thread: "a", Ack: func() {}}))
	h.step(Woken{Thread: "b", Ack: func() {}})
	var n int
	h.step(Woken{Thread: "a", Ack: ack(&n)})
	rd := h.step(Drain{})
	if len(rd.Drain) != 1 || rd.Done {
		t.Fatalf("drain: %+v", rd)
	}
	h.step(Woken{Thread: "c", Ack: ack(&n)})
	if rd := h.step(ClaimDone{Thread: "b", Claim: events.Claim{Thread: "b", Lease: events.Lease{Session: "s1"}}}); rd.Spawn != nil || rd.Done {
		t.Fatalf("claim during drain: %+v", rd)
	}
	rd = h.step(Terminated{Thread: "a", Clean: true, Released: true})
	if !rd.Done || len(rd.Acks) != 0 || len(rd.Peeks)+len(rd.Claims) != 0 || n != 0 {
		t.Fatalf("end of drain: %+v, acks run %d", rd, n)
	}
}

// A claim that ends once the runner's context is done spawns nothing.
func TestScheduler_claimed_ended(t *testing.T) {
	h := newHarness(t, "s1", false)
	h.step(Woken{Thread: "t", Ack: func() {}})
	c := events.Claim{Thread: "t", Seq: 1, Lease: events.Lease{Session: "s1"}}
	if rd := h.s.Step(Input{Now: h.now, Ended: true, Event: ClaimDone{Thread: "t", Claim: c}}); rd.Spawn != nil {
		t.Fatal("spawned after the end")
	}
}

// MaxClaiming bounds the claims and peeks in flight; the rest wait in order.
func TestScheduler_pump_maxClaiming(t *testing.T) {
	h := newHarness(t, "s1", false)
	var started []string
	for i := range 6 {
		rd := h.step(LookAt{Thread: fmt.Sprintf("t%d", i)})
		started = append(started, rd.Peeks...)
	}
	if len(started) != 4 {
		t.Fatalf("started %v, want 4", started)
	}
	rd := h.step(PeekDone{Thread: "t0"})
	if len(rd.Peeks) != 1 || rd.Peeks[0] != "t4" {
		t.Fatalf("after a slot frees: %v, want t4", rd.Peeks)
	}
}

// The same seed and inputs give the same timers: jitter is the
// scheduler's own, seeded.
func TestScheduler_jitter_seeded(t *testing.T) {
	run := func() []Timer {
		h := newHarness(t, "sa", false)
		h.live("sa", "sb")
		var out []Timer
		for i := range 50 {
			out = append(out, h.step(post(fmt.Sprintf("t%d", i), uint64(i+1))).Timers...)
		}
		return out
	}
	a, b := run(), run()
	if len(a) == 0 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("timers differ or none: %d vs %d", len(a), len(b))
	}
}

// Wake is always the earliest pending timer, and a tick fires every timer
// due and no other.
func TestScheduler_fire_order(t *testing.T) {
	h := newHarness(t, "s1", false)
	h.step(Woken{Thread: "a", Ack: func() {}})
	h.step(Woken{Thread: "b", Ack: func() {}})
	h.step(ClaimDone{Thread: "a", Err: errors.New("x")}) // retry within 250ms, recheck within 20s
	rd := h.step(ClaimDone{Thread: "b", Err: errors.New("x")})
	if rd.Wake.IsZero() || rd.Wake.After(t0.Add(ClaimRetryDelay)) {
		t.Fatalf("Wake = %v, want the first retry", rd.Wake)
	}
	rd = h.after(ClaimRetryDelay)
	if got := claimed(rd); len(got) != 2 {
		t.Fatalf("retries claimed %v", got)
	}
	if rd.Wake.Before(t0.Add(ttl)) {
		t.Fatalf("Wake = %v: the rechecks are not due before a TTL", rd.Wake)
	}
}
