package sched

import (
	"fmt"
	"slices"
	"testing"

	"github.com/artifactr/artifactr/events"
)

// With an ownership hook, the scheduler claims only the threads it owns,
// whatever the hash over the live sessions says, and parks no wake-up of
// another's; Disowned drains the actors of threads it gave up and drops
// their queued claims and wake-ups (unacknowledged), and a claim in
// flight of such a thread is drained once spawned.
func TestScheduler_owns_disowned(t *testing.T) {
	h := newHarness(t, "me", false)
	mine := map[string]bool{"a": true, "b": true, "c": true}
	h.s.cfg.Owns = func(th string) bool { return mine[th] }
	h.live("me", "other")

	if rd := h.step(post("x", 1)); len(rd.Claims) != 0 {
		t.Fatalf("claimed a thread it does not own: %+v", rd)
	}
	h.hold("a", h.step(post("a", 2)))
	rdB := h.step(post("b", 3)) // its claim stays in flight
	if !slices.Equal(claimed(rdB), []string{"b"}) {
		t.Fatalf("want a claim of b, got %+v", rdB)
	}
	acked := 0
	if rd := h.step(Woken{Thread: "x", Ack: func() { acked++ }}); len(rd.Claims) != 0 || len(rd.Acks) != 0 {
		t.Fatalf("a wake-up of another's thread: %+v", rd)
	}

	mine = map[string]bool{"c": true}
	rd := h.step(Disowned{})
	if !slices.Equal(rd.Drain, []string{"a"}) {
		t.Fatalf("Disowned drains %v, want [a]", rd.Drain)
	}
	if !h.s.Holds(func(th string) bool { return th == "b" }) {
		t.Fatal("b's claim in flight is not held")
	}
	h.seq++
	c := events.Claim{Thread: "b", Seq: h.seq, Lease: events.Lease{Thread: "b", Session: "me"}}
	rd = h.step(ClaimDone{Thread: "b", Claim: c})
	rd = h.step(Spawned{Spawn: *rd.Spawn})
	if !slices.Equal(rd.Drain, []string{"b"}) {
		t.Fatalf("a claim that landed after Disowned: drain %v, want [b]", rd.Drain)
	}
	if rd := h.step(LookAt{Thread: "a"}); len(rd.Peeks) != 0 {
		t.Fatalf("looked at a thread given up: %+v", rd)
	}
	if acked != 0 {
		t.Fatalf("%d wake-ups of another's thread acknowledged", acked)
	}
}

// A claim that failed after it took the lease leaves the lease under this
// runner's live session. If the thread's partition moves away meanwhile,
// the new owner finds the lease live and waits: only this runner can free
// it. So this runner claims it all the same, and drains it once spawned
// (a handover, which gives the lease up), however the thread was disowned.
func TestScheduler_owns_failedClaimLeaseFreedWhenDisowned(t *testing.T) {
	h := newHarness(t, "me", false)
	mine := map[string]bool{"a": true}
	h.s.cfg.Owns = func(th string) bool { return mine[th] }
	h.live("me", "other")

	if rd := h.step(post("a", 1)); !slices.Equal(claimed(rd), []string{"a"}) {
		t.Fatalf("want a claim of a, got %+v", rd)
	}
	h.lease("a", "me") // the lease landed; the marker's outcome did not come back
	h.step(ClaimDone{Thread: "a", Err: fmt.Errorf("append thread_claimed: %w", events.ErrUnavailable)})
	mine = map[string]bool{}
	h.step(Disowned{})

	var rd Ready
	for i := 0; i < 8 && len(rd.Claims) == 0; i++ {
		rd = h.after(MaxClaimRetry)
	}
	if !slices.Equal(claimed(rd), []string{"a"}) {
		t.Fatalf("a disowned thread whose lease this session holds with no claim is never claimed: its lease would block the new owner until this runner ends: %+v", rd)
	}
	if rd := h.hold("a", rd); !slices.Equal(rd.Drain, []string{"a"}) {
		t.Fatalf("the disowned thread's claim: drain %v, want [a]", rd.Drain)
	}

	// A thread not ours whose lease is another's, or nobody's, stays
	// unclaimed.
	h.lease("x", "other")
	h.lease("y", "")
	for range 4 {
		if rd := h.after(MaxClaimRetry); len(rd.Claims) != 0 {
			t.Fatalf("claimed a thread it does not own: %+v", rd)
		}
	}
}
