package natsembedtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/internal/testkit"
)

func TestRunForTest_jetStream_bigPayload(t *testing.T) {
	s := RunForTest(t)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got := nc.MaxPayload(); got != natsembed.DefaultMaxPayload {
		t.Errorf("MaxPayload = %d, want %d", got, natsembed.DefaultMaxPayload)
	}
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ctx, "s.a", make([]byte, 2<<20))
	if err != nil {
		t.Fatalf("publish 2 MiB: %v", err)
	}
	if ack.Sequence != 1 {
		t.Errorf("seq = %d", ack.Sequence)
	}
}

// TestCluster_stepDown creates an R3 stream, steps its leader down through
// the JetStream API, and checks that every acknowledged message survives and
// that writes continue under the new leader. It then restarts a follower
// with the same data directory and ports.
func TestCluster_StepDownStream_R3(t *testing.T) {
	c := StartCluster(t, 3)
	nc, err := nats.Connect(c.ClientURLs(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	old := c.WaitForStreamLeader("R3", 30*time.Second)
	publish := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			// Publishes around a leader change can time out with an unknown
			// outcome; the same msg id makes the retry safe.
			var err error
			for range 20 {
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				_, err = js.Publish(pctx, "r3.x", []byte(fmt.Sprint(i)), jetstream.WithMsgID(fmt.Sprint("m", i)))
				pcancel()
				if err == nil {
					break
				}
			}
			if err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
	}
	publish(0, 50)
	if err := StepDownStream(ctx, nc, "R3"); err != nil {
		t.Fatal(err)
	}
	var nl *natsembed.Server
	testkit.WaitFor(t, 30*time.Second, "a new stream leader after step-down", func() (bool, string) {
		nl = c.StreamLeader("R3")
		return nl != nil && nl != old, "old leader " + old.Name()
	})
	t.Logf("stream leader %s -> %s", old.Name(), nl.Name())
	publish(50, 100)

	// Restart a follower as the same member.
	for i, n := range c.Nodes {
		if n != nl {
			c.Restart(i)
			break
		}
	}
	c.WaitForMetaLeader(30 * time.Second)
	publish(100, 120)
	st, err := js.Stream(ctx, "R3")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 120 {
		t.Errorf("stream has %d messages, want 120", info.State.Msgs)
	}
}

func TestStepDownStream_unknownStream(t *testing.T) {
	s := RunForTest(t)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = StepDownStream(ctx, nc, "NOPE")
	if err == nil {
		t.Fatal("step down of a missing stream succeeded")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("step down timed out: %v", err)
	}
}
