package natsstore

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/internal/testkit"
)

// Issue 23, item 8: a post made while the server is down is never reported
// as not written when it may land: nats.go keeps what it sent in its
// reconnect buffer and sends it once the server is back. The post's first
// write is its message id key: when that is what the outage cut, the post
// itself was never published ("nothing posted"), though the key may land
// later. Either way, posting it again with the same id settles it: one
// message.
func TestStore_Post_whileDownIsUnknownAndSettles(t *testing.T) {
	cfg, srv := restartable(t)
	var err error
	s := open(t, srv, func(c *Config) { c.Timeout = 500 * time.Millisecond })
	post(t, s, "T", "before")
	srv.Shutdown()
	m := &eventspb.MessagePosted{MessageId: "maybe", Text: "while down"}
	_, err = s.Post(ctxT(t), "T", m)
	unknown := strings.Contains(err.Error(), "outcome unknown") && strings.Contains(err.Error(), `"T:maybe"`)
	if !errors.Is(err, events.ErrUnavailable) || !unknown && !strings.Contains(err.Error(), "nothing posted") {
		t.Fatalf("post while down: %v, want an unknown outcome naming msg id T:maybe, or nothing posted", err)
	}
	if srv, err = natsembed.Start(cfg); err != nil {
		t.Fatal(err)
	}
	testkit.CheckFor(t, 20*time.Second, func() error {
		_, err := s.Post(ctxT(t), "T", m)
		return err
	})
	n := 0
	for _, env := range load(t, s, "T") {
		if env.Event.GetMessagePosted().GetMessageId() == "maybe" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d messages with id maybe, want 1", n)
	}
}
