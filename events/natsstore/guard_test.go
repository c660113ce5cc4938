package natsstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// guardOn opens the store with Config.Guard on.
func guardOn(c *Config) { c.Guard = GuardOn }

// checkGuardedAppends runs the guard's contract on s, which guards: a
// guarded append lands while the run subject is where the writer read it,
// is refused with ErrRunMoved (nothing written) once another run event
// landed, and with ErrThreadBusy once a newer claim exists; readers never
// see a guard. Spec: AppendFenced, I1_ConsumedAtMostOnce.
func checkGuardedAppends(t *testing.T, s *Store, thread string) {
	t.Helper()
	if !s.Guarded() {
		t.Fatal("the store does not guard")
	}
	m1 := post(t, s, thread, "m1")
	m2 := post(t, s, thread, "m2")
	c := claim(t, s, thread, "A")
	run0 := lastSeq(t, s, thread, events.KindRun)

	// Lands: the run subject is where the writer read it.
	ack, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m1, "echo"), events.FencedGuarded(c, run0))
	if err != nil {
		t.Fatalf("guarded run_started at run seq %d: %v", run0, err)
	}
	if got := lastSeq(t, s, thread, events.KindRun); got != ack.Seq {
		t.Fatalf("run subject at %d, want the ack's %d", got, ack.Seq)
	}

	// Refused: the run subject moved past what the writer read (a forged
	// consumption landed in its window).
	before := lastSeq(t, s, thread, events.KindRun)
	_, err = s.Append(ctxT(t), events.NewSteeringGiven(c, time.Now(), "r1", m2), events.FencedGuarded(c, run0))
	if !errors.Is(err, events.ErrConflict) || !errors.Is(err, events.ErrRunMoved) || errors.Is(err, events.ErrThreadBusy) {
		t.Fatalf("guarded append after the run subject moved: %v, want ErrConflict and ErrRunMoved, not ErrThreadBusy", err)
	}
	if got := lastSeq(t, s, thread, events.KindRun); got != before {
		t.Fatalf("a refused guarded append wrote: run subject at %d, was %d", got, before)
	}

	// The same append with what the writer now knows lands.
	if _, err := s.Append(ctxT(t), events.NewSteeringGiven(c, time.Now(), "r1", m2), events.FencedGuarded(c, before)); err != nil {
		t.Fatalf("guarded append at the current run seq: %v", err)
	}

	// Refused by the fence: a newer claim exists.
	newer := newerClaim(t, s, c, "B")
	before = lastSeq(t, s, thread, events.KindRun)
	_, err = s.Append(ctxT(t), events.NewRunAbandoned(c, time.Now(), "r1", c.Seq, "x"), events.FencedGuarded(c, before))
	if !errors.Is(err, events.ErrThreadBusy) || errors.Is(err, events.ErrRunMoved) {
		t.Fatalf("guarded append under a lost claim (newer marker %d): %v, want ErrThreadBusy", newer, err)
	}
	if got := lastSeq(t, s, thread, events.KindRun); got != before {
		t.Fatalf("a fenced-off guarded append wrote: run subject at %d, was %d", got, before)
	}

	// Readers never see a guard: Load, Replay and Tail return events only.
	for _, e := range load(t, s, thread) {
		if e.Err != nil || s.subj.IsGuard(e.Subject) {
			t.Fatalf("Load returned %d %s: %v", e.Seq, e.Subject, e.Err)
		}
	}
	var replayed int
	if _, err := s.Replay(ctxT(t), s.subj.All(), 1, func(e events.Envelope) error {
		replayed++
		if e.Err != nil || s.subj.IsGuard(e.Subject) {
			t.Errorf("Replay returned %d %s: %v", e.Seq, e.Subject, e.Err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tail, err := s.Tail(ctxT(t), s.subj.ThreadAll(thread), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Stop()
	last := lastSeq(t, s, thread, events.KindClaim)
	for {
		e, err := tail.Next(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if e.Err != nil || s.subj.IsGuard(e.Subject) {
			t.Fatalf("Tail returned %d %s: %v", e.Seq, e.Subject, e.Err)
		}
		if e.GuardBefore != (e.Seq == ack.Seq) && e.Type != events.TypeSteeringGiven {
			t.Fatalf("Tail: %d %s GuardBefore %v", e.Seq, e.Type, e.GuardBefore)
		}
		if e.Seq >= last {
			break
		}
	}
	// A durable over the whole stream: no guard delivered, and the event
	// after one says so, so a reader that watches for gaps sees none.
	d, err := s.OpenDurable(ctxT(t), events.DurableConfig{Name: "guardtest-" + thread, Filter: s.subj.ThreadAll(thread)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.DeleteDurable(ctxT(t), "guardtest-"+thread)
	var prev uint64
	for prev < last {
		ds, err := d.Fetch(ctxT(t), 100, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			t.Fatalf("durable: nothing after %d, want up to %d", prev, last)
		}
		for _, dl := range ds {
			e := dl.Env
			if e.Err != nil || s.subj.IsGuard(e.Subject) {
				t.Fatalf("durable delivered %d %s: %v", e.Seq, e.Subject, e.Err)
			}
			if e.Seq == ack.Seq && !e.GuardBefore {
				t.Fatalf("durable: %d, the first guarded event, without GuardBefore", e.Seq)
			}
			prev = e.Seq
		}
	}
	// NextSeq steps over a guard: the first guard is just before ack.
	if seq, ok, err := s.NextSeq(ctxT(t), ack.Seq-1); err != nil || !ok || seq != ack.Seq {
		t.Fatalf("NextSeq(%d), a guard: %d %v %v, want %d", ack.Seq-1, seq, ok, err, ack.Seq)
	}
}

// Guard on, on a single-replica file stream: the contract holds (it is
// slow there, not wrong).
func TestStore_Append_guardedR1File(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	checkGuardedAppends(t, open(t, srv, guardOn), "T")
}

// Guard auto picks by the stream: off on a single-replica file stream, on
// on a memory stream; off is off anywhere, and a guarded check is then the
// plain fence (it lands on top of a moved run subject).
func TestStore_Guard_auto(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	if s := open(t, srv); s.Guarded() {
		t.Fatal("auto on an R1 file stream: guards, want not")
	}
	_, js := connect(t, srv)
	mem := open(t, srv).streamConfig(0)
	mem.Name, mem.Subjects, mem.Storage = "MEM", []string{"memthreads.>"}, jetstream.MemoryStorage
	if _, err := js.CreateStream(ctxT(t), mem); err != nil {
		t.Fatal(err)
	}
	onMem := func(c *Config) {
		c.Stream, c.Prefix, c.Bucket, c.MessageIDBucket = "MEM", "memthreads", "memclaims", "mem_ids"
	}
	s := open(t, srv, onMem)
	if !s.Guarded() {
		t.Fatal("auto on a memory stream: does not guard, want it to")
	}
	checkGuardedAppends(t, s, "M")

	off := open(t, srv, func(c *Config) { c.Guard = GuardOff })
	if off.Guarded() {
		t.Fatal("off: guards")
	}
	m := post(t, off, "O", "m1")
	c := claim(t, off, "O", "A")
	if _, err := off.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "echo"), events.Fenced(c)); err != nil {
		t.Fatal(err)
	}
	// Stale run seq 0: unguarded, only the fence counts, so it lands.
	if _, err := off.Append(ctxT(t), events.NewSteeringGiven(c, time.Now(), "r1", m), events.FencedGuarded(c, 0)); err != nil {
		t.Fatalf("guard off: a guarded check is the fence alone; got %v", err)
	}
}

// Guard on needs atomic publish on the stream.
func TestStore_Guard_onNeedsAtomicPublish(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	_, js := connect(t, srv)
	cfg := open(t, srv).streamConfig(0)
	cfg.Name, cfg.Subjects, cfg.AllowAtomicPublish = "NOBATCH", []string{"nobatch.>"}, false
	if _, err := js.CreateStream(ctxT(t), cfg); err != nil {
		t.Fatal(err)
	}
	set := func(g GuardMode) func(*Config) {
		return func(c *Config) {
			c.Stream, c.Prefix, c.Bucket, c.MessageIDBucket, c.Guard = "NOBATCH", "nobatch", "nbclaims", "nb_ids", g
		}
	}
	if s := open(t, srv, set(GuardAuto)); s.Guarded() {
		t.Fatal("auto without atomic publish: guards")
	}
	s, err := New(ctxT(t), Config{URL: srv.ClientURL(), Stream: "NOBATCH", Prefix: "nobatch", Bucket: "nbclaims", MessageIDBucket: "nb_ids", Guard: GuardOn})
	if err == nil {
		s.Close()
		t.Fatal("guard on without atomic publish: opened")
	}
	if !errors.Is(err, events.ErrUnsafeConfig) {
		t.Fatalf("guard on without atomic publish: %v, want ErrUnsafeConfig", err)
	}
	if _, err := ParseGuardMode("sometimes"); err == nil {
		t.Fatal("ParseGuardMode accepted sometimes")
	}
}

// A guarded append whose reply was lost is settled by reading back its msg
// id: the caller's retry with the same id, after it landed, returns the
// original sequence, not a refusal by its own write.
func TestStore_Append_guardedRetryAfterLanding(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv, guardOn)
	m := post(t, s, "T", "m1")
	c := claim(t, s, "T", "A")
	ev := events.NewRunStarted(c, time.Now(), "r1", m, "echo")
	first, err := s.Append(ctxT(t), ev, events.FencedGuarded(c, 0), events.WithMsgID("T:rs1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Append(ctxT(t), ev, events.FencedGuarded(c, 0), events.WithMsgID("T:rs1"))
	if err != nil || again.Seq != first.Seq || !again.Duplicate {
		t.Fatalf("retry: %+v %v, want a duplicate of %d", again, err, first.Seq)
	}
	// The read-back runs on a fresh context: a caller's context that ended
	// does not turn the answer into "canceled".
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	again, err = s.Append(ctx, ev, events.FencedGuarded(c, 0), events.WithMsgID("T:rs1"))
	if err != nil || again.Seq != first.Seq {
		t.Fatalf("retry on an ended context: %+v %v, want the original %d read back", again, err, first.Seq)
	}
}

// On a 3-node cluster with an R3 stream, auto guards, and the contract
// holds.
func TestStore_Append_guardedR3(t *testing.T) {
	c := natsembedtest.StartCluster(t, 3)
	nc, err := nats.Connect(c.ClientURLs(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	s, err := New(ctxT(t), Config{Conn: nc, Replicas: 3, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c.WaitForStreamLeader(DefaultStream, 30*time.Second)
	checkGuardedAppends(t, s, "T")
}
