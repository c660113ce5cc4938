package natsstore

import (
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// The partition lease contract on JetStream: each handle is its own
// connection to one embedded server.
func TestStore_partitionLeaser(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	eventstest.RunPartitionLeaser(t, eventstest.PartitionHarness{
		Open: func(t *testing.T, now func() time.Time) events.PartitionLeaser {
			return open(t, srv, func(c *Config) { c.Now = now })
		},
	})
}
