package memstore_test

import (
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/memstore"
)

// The read models' port holds on memstore: each case gets a fresh log on a
// test clock, which the redelivery case moves past the ack wait.
func TestStore_readModelContract(t *testing.T) {
	eventstest.RunReadModel(t, eventstest.ReadModelHarness{
		Open: func(t *testing.T) eventstest.ReadModelEnv {
			clock := eventstest.NewClock(0)
			log := memstore.NewLogWith(memstore.LogConfig{Now: clock.Now})
			return eventstest.ReadModelEnv{Store: log.Open(memstore.Config{Now: clock.Now}), Advance: clock.Advance}
		},
	})
}

// The same holds on the real clock, as natsstore runs the suite: Fetch
// waits for the ack wait to pass.
func TestStore_readModelContractRealClock(t *testing.T) {
	eventstest.RunReadModel(t, eventstest.ReadModelHarness{
		Open: func(t *testing.T) eventstest.ReadModelEnv {
			return eventstest.ReadModelEnv{Store: memstore.New(memstore.Config{})}
		},
	})
}

func TestStore_snapshotContract(t *testing.T) {
	log := memstore.NewLog()
	eventstest.RunSnapshot(t, eventstest.SnapshotHarness{
		Open: func(t *testing.T, maxEventBytes int) events.SnapshotStore {
			return log.Open(memstore.Config{MaxEventBytes: maxEventBytes, Now: time.Now})
		},
	})
}
