package natsstore

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// TestStore_domain_leafFromHub: a store connected to a hub reaches the
// JetStream of its leaf node through Config.Domain, on every path it has:
// setup, post, claim (lease and marker), fenced append and its refusal,
// session leases, LastSeq, Load and LoadUpTo (direct gets), snapshots, tail,
// a read-model bucket and the work queue. On the hub, $JS.API and $KV reach
// the hub's own JetStream, and the leaf refuses them across the leaf
// connection, so a prefix hard-coded anywhere fails here.
func TestStore_domain_leafFromHub(t *testing.T) {
	hub, leaf := natsembedtest.StartLeaf(t, "hub", "leaf")
	s := open(t, hub, func(c *Config) { c.Domain = "leaf"; c.Timeout = 10 * time.Second })
	ctx := ctxT(t)

	wq, err := s.WorkQueue(ctx, "domain-runners")
	if err != nil {
		t.Fatalf("work queue: %v", err)
	}
	defer wq.Stop()
	p1 := post(t, s, "T", "m1")
	if th, ack, err := wq.Next(ctx); err != nil || th != "T" {
		t.Fatalf("work queue Next = %q, %v; want T", th, err)
	} else {
		ack()
	}

	c := claim(t, s, "T", "h1")
	if _, err := s.Append(ctx, events.NewRunStarted(c, time.Now(), "r1", p1, "echo"), events.Fenced(c)); err != nil {
		t.Fatalf("fenced append: %v", err)
	}
	newerClaim(t, s, c, "h2")
	_, err = s.Append(ctx, events.NewRunStarted(c, time.Now(), "r2", p1, "echo"), events.Fenced(c))
	if !errors.Is(err, events.ErrThreadBusy) {
		t.Fatalf("stale fenced append: %v, want ErrThreadBusy", err)
	}

	sess, err := s.OpenSession(ctx, "runner-1", 10*time.Second)
	if err != nil {
		t.Fatalf("open session: %v", err)
	}
	sc, envs, err := events.AcquireSessionClaim(ctx, s, sess, "U", "runner-1/1", 1, time.Now())
	if err != nil || len(envs) != 1 || envs[0].Seq != sc.Seq {
		t.Fatalf("session claim: %+v, %d events, %v", sc, len(envs), err)
	}
	if sess, err = s.RenewSession(ctx, sess); err != nil {
		t.Fatalf("renew session: %v", err)
	}
	if l, held, err := s.GetLease(ctx, "U"); err != nil || !held || l.Session != sess.ID {
		t.Fatalf("lease of U: %+v held %v, %v", l, held, err)
	}

	last := lastSeq(t, s, "T", events.KindClaim)
	upTo, err := s.LoadUpTo(ctx, "T", 1, last)
	if err != nil || len(upTo) != 4 || upTo[3].Seq != last {
		t.Fatalf("LoadUpTo %d: %d events, %v; want 4 ending at %d", last, len(upTo), err, last)
	}
	if got := load(t, s, "T"); len(got) != 4 {
		t.Fatalf("Load: %d events, want 4", len(got))
	}

	if err := s.SaveSnapshot(ctx, "T", []byte("fold")); err != nil {
		t.Fatalf("save snapshot: %v", err)
	}
	if snap, err := s.LoadSnapshot(ctx, "T"); err != nil || string(snap) != "fold" {
		t.Fatalf("load snapshot: %q, %v", snap, err)
	}

	tail, err := s.Tail(ctx, s.Subjects().ThreadAll("T"), 1)
	if err != nil {
		t.Fatalf("tail: %v", err)
	}
	defer tail.Stop()
	for i := range 4 {
		if env, err := tail.Next(ctx); err != nil || env.Seq != upTo[i].Seq {
			t.Fatalf("tail event %d: seq %d, %v; want %d", i, env.Seq, err, upTo[i].Seq)
		}
	}

	b, err := s.openBucket(ctx, "domain_model", true)
	if err != nil {
		t.Fatalf("bucket: %v", err)
	}
	rev, err := b.Put(ctx, "k", []byte("v"), 0)
	if err != nil {
		t.Fatalf("bucket put: %v", err)
	}
	if e, found, err := b.Get(ctx, "k"); err != nil || !found || string(e.Value) != "v" || e.Revision != rev {
		t.Fatalf("bucket get: %+v found %v, %v", e, found, err)
	}
	n := 0
	if err := b.Scan(ctx, ">", func(events.KVEntry) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("bucket scan: %d entries, %v", n, err)
	}

	if err := s.CloseSession(ctx, sess); err != nil {
		t.Fatalf("close session: %v", err)
	}

	// Everything is in the leaf's JetStream; the hub's has none of it.
	_, ljs := connect(t, leaf)
	if got := streamMsgs(t, ljs, DefaultStream); got != 5 {
		t.Fatalf("leaf stream %s holds %d messages, want 5", DefaultStream, got)
	}
	_, hjs := connect(t, hub)
	for _, name := range []string{DefaultStream, "KV_" + DefaultBucket, "KV_" + DefaultSnapshotBucket, "KV_domain_model"} {
		if _, err := hjs.Stream(ctx, name); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Fatalf("hub stream %s: %v, want not found", name, err)
		}
	}
}

func TestConfig_domainInvalid(t *testing.T) {
	c := Config{URL: "nats://127.0.0.1:1", Domain: "a.b"}
	c.setDefaults()
	if err := c.validate(); err == nil {
		t.Fatal("Domain a.b accepted")
	}
}
