package natsstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

func TestStore_strategies(t *testing.T) {
	for _, p := range []int{1, 4} {
		t.Run(fmt.Sprintf("P%d", p), func(t *testing.T) {
			srv := natsembedtest.RunForTest(t)
			eventstest.RunStrategies(t, eventstest.Harness{
				Subjects: events.Subjects{Partitions: p},
				Open: func(t *testing.T, now func() time.Time) events.Store {
					return open(t, srv, func(c *Config) { c.Now = now; c.Partitions = p })
				},
			})
		})
	}
}
