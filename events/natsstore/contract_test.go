package natsstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// TestStore_contract runs the shared Store contract against JetStream: every
// handle is a separate connection to one embedded server, as separate
// processes would be.
//
// It runs on one stream (P=1, the layout before partitions) and on four
// partitions' streams: every check is per thread, so each holds in the
// thread's partition.
func TestStore_contract(t *testing.T) {
	for _, p := range []int{1, 4} {
		t.Run(fmt.Sprintf("P%d", p), func(t *testing.T) {
			t.Run("direct", func(t *testing.T) { runContract(t, true, p) })
			// A stream without direct reads (replicated, or made before
			// them) loads with ordered consumers instead.
			t.Run("consumer", func(t *testing.T) { runContract(t, false, p) })
		})
	}
}

func runContract(t *testing.T, direct bool, partitions int) {
	srv := natsembedtest.RunForTest(t)
	_, js := connect(t, srv)
	eventstest.RunStore(t, eventstest.Harness{
		Subjects: events.Subjects{Partitions: partitions},
		Open: func(t *testing.T, now func() time.Time) events.Store {
			s := open(t, srv, func(c *Config) { c.Now = now; c.Partitions = partitions })
			s.direct = s.direct && direct
			return s
		},
		PublishRaw: publishRaw(js),
	})
}

// The guard's contract, with Config.Guard on (a single-replica file stream
// guards only when told to).
// With P = 4, each guard goes to its thread's partition stream.
func TestStore_contractGuarded(t *testing.T) {
	for _, p := range []int{1, 4} {
		t.Run(fmt.Sprintf("P%d", p), func(t *testing.T) {
			srv := natsembedtest.RunForTest(t)
			eventstest.RunGuarded(t, eventstest.Harness{
				Subjects: events.Subjects{Partitions: p},
				Open: func(t *testing.T, now func() time.Time) events.Store {
					return open(t, srv, func(c *Config) { c.Now, c.Guard, c.Partitions = now, GuardOn, p })
				},
			})
		})
	}
}
