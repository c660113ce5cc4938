package memstore_test

import (
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/memstore"
)

func TestStore_partitionLeaser(t *testing.T) {
	log := memstore.NewLog()
	eventstest.RunPartitionLeaser(t, eventstest.PartitionHarness{
		Open: func(t *testing.T, now func() time.Time) events.PartitionLeaser {
			return log.Open(memstore.Config{Now: now})
		},
	})
}
