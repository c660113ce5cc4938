package natsstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"artifactr/events"
	"artifactr/internal/natsembed"
	"artifactr/internal/testkit"
)

// TestStore_R3stepDown appends a chain of compare-and-set events to an R3
// stream while its leader steps down twice: every acknowledged event is
// stored exactly once, and the old claim stays fenced afterwards.
func TestStore_Append_R3stepDown(t *testing.T) {
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
	acked := map[uint64]bool{ack.Seq: true}
	last := ack.Seq
	for i := range 60 {
		if i == 20 || i == 40 {
			old := c.StreamLeader(DefaultStream)
			if err := natsembed.StepDownStream(ctxT(t), nc, DefaultStream); err != nil {
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
