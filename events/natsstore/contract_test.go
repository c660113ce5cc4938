package natsstore

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// TestStore_contract runs the shared Store contract against JetStream: every
// handle is a separate connection to one embedded server, as separate
// processes would be.
func TestStore_contract(t *testing.T) {
	t.Run("direct", func(t *testing.T) { runContract(t, true) })
	// A stream without direct reads (replicated, or made before them)
	// loads with ordered consumers instead.
	t.Run("consumer", func(t *testing.T) { runContract(t, false) })
}

func runContract(t *testing.T, direct bool) {
	srv := natsembedtest.RunForTest(t)
	_, js := connect(t, srv)
	eventstest.RunStore(t, eventstest.Harness{
		Open: func(t *testing.T, now func() time.Time) events.Store {
			s := open(t, srv, func(c *Config) { c.Now = now })
			s.direct = s.direct && direct
			return s
		},
		PublishRaw: func(t *testing.T, subject string, h events.Header, data []byte) {
			if _, err := js.PublishMsg(ctxT(t), &nats.Msg{Subject: subject, Header: nats.Header(h), Data: data}); err != nil {
				t.Fatalf("publish raw to %s: %v", subject, err)
			}
		},
	})
}

// The guard's contract, with Config.Guard on (a single-replica file stream
// guards only when told to).
func TestStore_contractGuarded(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	eventstest.RunGuarded(t, eventstest.Harness{
		Open: func(t *testing.T, now func() time.Time) events.Store {
			return open(t, srv, func(c *Config) { c.Now, c.Guard = now, GuardOn })
		},
	})
}
