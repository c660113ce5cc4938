package natsstore

import (
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// TestStore_readModelContract runs the read models' port contract against
// JetStream, each case on a server of its own: the suite checks stream
// sequences and durable positions exactly. The server's clock is real, so
// the redelivery case waits for its ack wait in Fetch.
func TestStore_readModelContract(t *testing.T) {
	eventstest.RunReadModel(t, eventstest.ReadModelHarness{
		Open: func(t *testing.T) eventstest.ReadModelEnv {
			return eventstest.ReadModelEnv{Store: open(t, natsembedtest.RunForTest(t))}
		},
	})
}

// TestStore_snapshotContract runs the snapshot contract against JetStream,
// each case on a server of its own, whose stream takes the case's event
// limit.
func TestStore_snapshotContract(t *testing.T) {
	eventstest.RunSnapshot(t, eventstest.SnapshotHarness{
		Open: func(t *testing.T, maxEventBytes int) events.SnapshotStore {
			return open(t, natsembedtest.RunForTest(t), func(c *Config) { c.MaxEventBytes = maxEventBytes })
		},
	})
}
