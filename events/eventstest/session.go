package eventstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
)

// sessionTests are the contract scenarios of runner sessions.
var sessionTests = []struct {
	name string
	fn   func(*testing.T, Harness)
}{
	{"SessionLeases", testSessionLeases},
	{"SessionLapseFreesAllLeases", testSessionLapseFreesAllLeases},
	{"SessionClaimFence", testSessionClaimFence},
	{"SessionClaimFrom", testSessionClaimFrom},
	{"WatchLeases", testWatchLeases},
}

// A thread lease under a session is held while the session lives, needs no
// renewal of its own, and is free once released.
func testSessionLeases(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	sa, err := s.OpenSession(ctxT(t), "runner-a", TTL)
	if err != nil {
		t.Fatalf("open session: %v", err)
	}
	sb, err := s.OpenSession(ctxT(t), "runner-b", TTL)
	if err != nil {
		t.Fatalf("open second session: %v", err)
	}
	if sa.ID == sb.ID || sa.Revision == 0 {
		t.Fatalf("sessions %+v and %+v", sa, sb)
	}
	th := NewThread(t)
	l, err := s.AcquireSessionLease(ctxT(t), th, "a/1", sa)
	if err != nil {
		t.Fatalf("acquire under a session: %v", err)
	}
	if l.Session != sa.ID || l.Holder != "a/1" {
		t.Fatalf("lease %+v", l)
	}
	_, err = s.AcquireSessionLease(ctxT(t), th, "b/1", sb)
	wantErr(t, err, events.ErrThreadBusy, "acquire a lease whose session lives")
	_, err = s.AcquireLease(ctxT(t), th, "c", TTL)
	wantErr(t, err, events.ErrThreadBusy, "acquire with a TTL a lease whose session lives")
	got, live, err := s.GetLease(ctxT(t), th)
	if err != nil || !live || got.Session != sa.ID || got.Holder != "a/1" {
		t.Fatalf("get lease: %+v live=%v err=%v", got, live, err)
	}
	// Its own runner may take it again: a claim that failed half way
	// leaves the lease, and only that runner knows it holds no claim.
	l, err = s.AcquireSessionLease(ctxT(t), th, "a/1", sa)
	if err != nil || l.Revision == got.Revision {
		t.Fatalf("re-acquire under the same session: %+v %v", l, err)
	}
	// Renewing the session is all it takes to keep every lease it holds.
	sa2, err := s.RenewSession(ctxT(t), sa)
	if err != nil || sa2.Revision == sa.Revision {
		t.Fatalf("renew session: %+v %v", sa2, err)
	}
	_, err = s.RenewSession(ctxT(t), sa)
	wantErr(t, err, events.ErrLeaseLost, "renew a session from a stale revision")
	if err := s.ReleaseLease(ctxT(t), l); err != nil {
		t.Fatalf("release: %v", err)
	}
	if _, err := s.AcquireSessionLease(ctxT(t), th, "b/2", sb); err != nil {
		t.Fatalf("acquire a released lease: %v", err)
	}
	if err := s.CloseSession(ctxT(t), sa2); err != nil {
		t.Fatalf("close session: %v", err)
	}
	err = s.CloseSession(ctxT(t), sa2)
	wantErr(t, err, events.ErrLeaseLost, "close a closed session")
	_, err = s.RenewSession(ctxT(t), sa2)
	wantErr(t, err, events.ErrLeaseLost, "renew a closed session")
}

// Spec: Lapse. A session that lapses, by the reader's clock or by being
// closed, frees every lease that lives by it at once, with no write to any
// of them.
func testSessionLapseFreesAllLeases(t *testing.T, h Harness) {
	clock := NewClock(0)
	a := h.Open(t, clock.Now)
	sa, err := a.OpenSession(ctxT(t), "runner-a", TTL)
	if err != nil {
		t.Fatalf("open session: %v", err)
	}
	var threads []string
	for range 3 {
		th := NewThread(t)
		if _, err := a.AcquireSessionLease(ctxT(t), th, "a/x", sa); err != nil {
			t.Fatalf("acquire %s: %v", th, err)
		}
		threads = append(threads, th)
	}
	// B's clock is past A's session: every lease of it is free for B.
	bclock := NewClock(0)
	bclock.Advance(2 * TTL)
	b := h.Open(t, bclock.Now)
	sb, err := b.OpenSession(ctxT(t), "runner-b", TTL)
	if err != nil {
		t.Fatalf("open session b: %v", err)
	}
	for _, th := range threads {
		if _, live, _ := b.GetLease(ctxT(t), th); live {
			t.Fatalf("%s: lease live past its session's expiry", th)
		}
		if _, err := b.AcquireSessionLease(ctxT(t), th, "b/x", sb); err != nil {
			t.Fatalf("take over %s after the session lapsed: %v", th, err)
		}
	}
	// Closing a session frees its leases too, by any clock.
	th := NewThread(t)
	if _, err := b.AcquireSessionLease(ctxT(t), th, "b/y", sb); err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if err := b.CloseSession(ctxT(t), sb); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := a.AcquireSessionLease(ctxT(t), th, "a/y", sa); err != nil {
		t.Fatalf("acquire after the holder's session closed: %v", err)
	}
}

// A claim under a session fences like any other: after a lapsed session's
// thread is taken over, its holder's fenced writes are refused.
func testSessionClaimFence(t *testing.T, h Harness) {
	clock := NewClock(0)
	a := h.Open(t, clock.Now)
	th := NewThread(t)
	m := post(t, a, th, "m1", "hello")
	sa, err := a.OpenSession(ctxT(t), "runner-a", TTL)
	if err != nil {
		t.Fatal(err)
	}
	ca, hist, err := events.AcquireSessionClaim(ctxT(t), a, sa, th, "a/1", 0, clock.Now())
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if len(hist) != 2 || hist[len(hist)-1].Seq != ca.Seq {
		t.Fatalf("history %d events, last %d, claim %d", len(hist), lastEnvSeq(hist), ca.Seq)
	}
	bclock := NewClock(0)
	bclock.Advance(2 * TTL)
	b := h.Open(t, bclock.Now)
	sb, err := b.OpenSession(ctxT(t), "runner-b", TTL)
	if err != nil {
		t.Fatal(err)
	}
	cb, _, err := events.AcquireSessionClaim(ctxT(t), b, sb, th, "b/1", 0, bclock.Now())
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	_, err = a.Append(ctxT(t), events.NewRunStarted(ca, clock.Now(), "run-a", m, "echo"), events.Fenced(ca))
	wantErr(t, err, events.ErrThreadBusy, "run_started of the lapsed session's claim")
	if _, err := b.Append(ctxT(t), events.NewRunStarted(cb, bclock.Now(), "run-b", m, "echo"), events.Fenced(cb)); err != nil {
		t.Fatalf("run_started of the new claim: %v", err)
	}
	// A's session renewal still works (nobody wrote its key), but the
	// thread is B's: liveness only, the fence decides.
	if _, err := a.RenewSession(ctxT(t), sa); err != nil {
		t.Fatalf("renew a's session: %v", err)
	}
	_, err = a.AcquireSessionLease(ctxT(t), th, "a/2", sa)
	wantErr(t, err, events.ErrThreadBusy, "a re-acquires while b's session lives")
}

// A claim can load from a sequence: a caller with a snapshot skips the rest.
func testSessionClaimFrom(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	th := NewThread(t)
	post(t, s, th, "m1", "a")
	m2 := post(t, s, th, "m2", "b")
	sess, err := s.OpenSession(ctxT(t), "runner", TTL)
	if err != nil {
		t.Fatal(err)
	}
	c, hist, err := events.AcquireSessionClaim(ctxT(t), s, sess, th, "r/1", m2, time.Now())
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if len(hist) != 2 || hist[0].Seq != m2 || hist[1].Seq != c.Seq {
		t.Fatalf("history from %d: %v", m2, seqs(hist))
	}
	// A second claim of a thread claimed before reads the claim subject
	// after its first guess fails.
	if err := events.ReleaseClaim(ctxT(t), s, c, "idle", time.Now()); err != nil {
		t.Fatal(err)
	}
	c2, _, err := events.AcquireSessionClaim(ctxT(t), s, sess, th, "r/2", 0, time.Now())
	if err != nil || c2.Seq <= c.Seq {
		t.Fatalf("second claim %+v: %v", c2, err)
	}
}

// A lease watch sees the current leases, then every change, sessions
// included.
func testWatchLeases(t *testing.T, h Harness) {
	s := h.Open(t, time.Now)
	sa, err := s.OpenSession(ctxT(t), "runner-a", TTL)
	if err != nil {
		t.Fatal(err)
	}
	th := NewThread(t)
	l, err := s.AcquireSessionLease(ctxT(t), th, "a/1", sa)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.WatchLeases(ctxT(t))
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel()
	seen := map[string]events.LeaseUpdate{}
	for {
		u, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("watch next before caught up: %v", err)
		}
		if u.CaughtUp {
			break
		}
		seen[u.Thread+"|"+u.Session] = u
	}
	if u := seen[th+"|"+sa.ID]; !u.Present || u.Holder != "a/1" {
		t.Fatalf("initial state lacks %s under %s: %v", th, sa.ID, seen)
	}
	if u := seen["|"+sa.ID]; !u.Present || u.Holder != "runner-a" {
		t.Fatalf("initial state lacks session %s: %v", sa.ID, seen)
	}
	if err := s.ReleaseLease(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseSession(ctxT(t), sa); err != nil {
		t.Fatal(err)
	}
	want := []events.LeaseUpdate{{Thread: th}, {Session: sa.ID}}
	for _, wu := range want {
		for {
			u, err := w.Next(ctx)
			if err != nil {
				t.Fatalf("waiting for %+v: %v", wu, err)
			}
			if u.Thread == wu.Thread && (wu.Thread != "" || u.Session == wu.Session) {
				if u.Present {
					t.Fatalf("update %+v: want removed", u)
				}
				break
			}
		}
	}
	w.Stop()
	if _, err := w.Next(ctx); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("next after stop: %v, want ErrClosed", err)
	}
}

func lastEnvSeq(envs []events.Envelope) uint64 {
	if len(envs) == 0 {
		return 0
	}
	return envs[len(envs)-1].Seq
}

func seqs(envs []events.Envelope) []uint64 {
	out := make([]uint64, len(envs))
	for i, e := range envs {
		out[i] = e.Seq
	}
	return out
}
