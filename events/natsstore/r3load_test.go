package natsstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"artifactr/events"
	"artifactr/internal/natsembed"
)

// TestStore_Load_R3seesAcked: on a replicated stream, Load, LoadUpTo and
// Replay return every event acked before the call, and a bucket's Scan
// every key written before it. Their ordered consumer is an
// R1 consumer, which the server may place on a follower that has not yet
// applied the last writes; its pending count alone would end the read
// early, and a claim would plan on a history missing consuming writes.
func TestStore_Load_R3seesAcked(t *testing.T) {
	c := natsembed.StartCluster(t, 3)
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
	last := ack.Seq
	for i := range 150 {
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
	b, err := s.Bucket(ctxT(t), "r3model", true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		if _, err := b.Put(ctxT(t), fmt.Sprintf("k%d", i), []byte("v"), 0); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		n := 0
		if err := b.Scan(ctxT(t), ">", func(Entry) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if n != i+1 {
			t.Fatalf("round %d: scan found %d keys, but %d were written before it", i, n, i+1)
		}
	}
}
