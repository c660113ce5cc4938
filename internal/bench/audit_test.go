package bench

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// The generator waits for acks rather than stall: with a client that
// allows 8 pending acks and gives a stalled publish 1ns, 3000 publishes
// through a window of 8 all land. Without the window the 9th publish
// stalls and fails with "too many outstanding async published messages".
func TestPublishWindowed_neverStalls(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(8))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "W", Subjects: []string{"w.>"}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	err = publishWindowed(ctx, js, n, 8, func() *nats.Msg {
		return &nats.Msg{Subject: "w.x", Data: []byte("x")}
	}, jetstream.WithStallWait(time.Nanosecond))
	if err != nil {
		t.Fatalf("windowed publishes: %v", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != n {
		t.Fatalf("%d messages stored, want %d", info.State.Msgs, n)
	}
	if err := publishWindowed(ctx, js, 1, 0, nil); err == nil {
		t.Fatal("a window of 0 was accepted")
	}
}
