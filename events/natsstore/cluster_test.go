package natsstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
)

// TestStore_R3stepDown appends a chain of compare-and-set events to an R3
// stream while its leader steps down twice: every acknowledged event is
// stored exactly once, and the old claim stays fenced afterwards.
func TestStore_Append_R3stepDown(t *testing.T) {
	c, nc, s, cl, ack := startR3(t)
	acked := map[uint64]bool{ack.Seq: true}
	last := ack.Seq
	for i := range 60 {
		if i == 20 || i == 40 {
			old := c.StreamLeader(DefaultStream)
			if err := natsembedtest.StepDownStream(ctxT(t), nc, DefaultStream); err != nil {
				t.Fatal(err)
			}
			testkit.CheckFor(t, 30*time.Second, func() error {
				if l := c.StreamLeader(DefaultStream); l == nil || l == old {
					return fmt.Errorf("no new leader yet")
				}
				return nil
			})
		}
		a, err := s.Append(ctxT(t), events.NewRunOutput(cl, time.Now(), "r1", fmt.Sprint(i)), events.ExpectLast(last))
		if err != nil {
			t.Fatalf("append %d across step-down: %v", i, err)
		}
		if acked[a.Seq] {
			t.Fatalf("append %d acked with seq %d twice", i, a.Seq)
		}
		acked[a.Seq], last = true, a.Seq
	}
	envs := load(t, s, "T")
	ids := map[string]bool{}
	for _, e := range envs {
		if ids[e.MsgID] {
			t.Fatalf("msg id %s stored twice", e.MsgID)
		}
		ids[e.MsgID] = true
		delete(acked, e.Seq)
	}
	if len(acked) != 0 {
		t.Fatalf("acked events missing from the stream: %v", acked)
	}
	newerClaim(t, s, cl, "B")
	if _, err := s.Append(ctxT(t), events.NewRunAbandoned(cl, time.Now(), "r1", cl.Seq, "x"), events.Fenced(cl)); err == nil {
		t.Fatal("fenced append under an old claim landed on R3")
	}
}

// TestStore_Load_R3seesAcked: on a replicated stream, Load, LoadUpTo and
// Replay return every event acked before the call, and a bucket's Scan
// every key written before it. Their ordered consumer is an
// R1 consumer, which the server may place on a follower that has not yet
// applied the last writes; its pending count alone would end the read
// early, and a claim would plan on a history missing consuming writes.
func TestStore_Load_R3seesAcked(t *testing.T) {
	_, _, s, cl, ack := startR3(t)
	last := ack.Seq
	for i := range 100 {
		a, err := s.Append(ctxT(t), events.NewRunOutput(cl, time.Now(), "r1", "x"), events.ExpectLast(last))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		last = a.Seq
		var envs []events.Envelope
		switch i % 4 {
		case 0:
			envs = load(t, s, "T")
		case 1:
			envs, err = s.LoadUpTo(ctxT(t), "T", 1, last)
		case 2:
			_, err = s.Replay(ctxT(t), s.Subjects().All(), 1, func(e events.Envelope) error { envs = append(envs, e); return nil })
		case 3:
			_, err = s.Replay(ctxT(t), s.Subjects().ThreadAll("T"), 1, func(e events.Envelope) error { envs = append(envs, e); return nil })
		}
		if err != nil {
			t.Fatal(err)
		}
		if n := len(envs); n == 0 || envs[n-1].Seq != last {
			got := uint64(0)
			if n > 0 {
				got = envs[n-1].Seq
			}
			t.Fatalf("round %d: loaded up to seq %d, but %d was acked before the load", i, got, last)
		}
	}
	b, err := s.openBucket(ctxT(t), "r3model", true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := b.Put(ctxT(t), fmt.Sprintf("k%d", i), []byte("v"), 0); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		n := 0
		if err := b.Scan(ctxT(t), ">", func(events.KVEntry) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if n != i+1 {
			t.Fatalf("round %d: scan found %d keys, but %d were written before it", i, n, i+1)
		}
	}
}

// startR3 starts a 3-node cluster and a store on it with the stream at R3,
// posts and claims thread T and starts a run fenced by the claim. It
// returns the run_started's ack.
func startR3(t *testing.T) (*natsembedtest.Cluster, *nats.Conn, *Store, events.Claim, events.Ack) {
	t.Helper()
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
	c.WaitForStreamLeader(DefaultStream, 30*time.Second)
	m := post(t, s, "T", "m1")
	cl := claim(t, s, "T", "A")
	ack, err := s.Append(ctxT(t), events.NewRunStarted(cl, time.Now(), "r1", m, "echo"), events.Fenced(cl))
	if err != nil {
		t.Fatal(err)
	}
	return c, nc, s, cl, ack
}
