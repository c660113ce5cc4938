package natsstore

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/internal/testkit"
)

// Issue 23, item 8: a post the store reports as failed while the server is
// down never lands later. nats.go's reconnect buffer would keep it and send
// it on reconnect; the store turns the buffer off.
func TestStore_Post_failedWhileDownNeverLands(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := natsembed.Config{DataDir: t.TempDir(), Listen: addr, NoSync: true}
	srv, err := natsembed.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown() })
	s := open(t, srv, func(c *Config) { c.Timeout = 500 * time.Millisecond })
	post(t, s, "T", "before")
	srv.Shutdown()
	_, err = s.Post(ctxT(t), "T", &eventspb.MessagePosted{MessageId: "lost", Text: "while down"})
	if err == nil {
		t.Fatal("a post while the server is down succeeded")
	}
	if !errors.Is(err, events.ErrUnavailable) {
		t.Fatalf("post while down: %v, want ErrUnavailable", err)
	}
	if srv, err = natsembed.Start(cfg); err != nil {
		t.Fatal(err)
	}
	// A buffered publish goes out on reconnect before any new one: once a
	// post after the restart landed, the one that failed would have too.
	testkit.CheckFor(t, 20*time.Second, func() error {
		_, err := s.Post(ctxT(t), "T", &eventspb.MessagePosted{MessageId: "after", Text: "after restart"})
		return err
	})
	for _, env := range load(t, s, "T") {
		if env.Event.GetMessagePosted().GetMessageId() == "lost" {
			t.Fatalf("the post reported failed landed at %d, after the reconnect", env.Seq)
		}
	}
}
