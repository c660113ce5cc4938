package natsstore

import (
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

func TestStore_strategies(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	eventstest.RunStrategies(t, eventstest.Harness{
		Open: func(t *testing.T, now func() time.Time) events.Store {
			return open(t, srv, func(c *Config) { c.Now = now })
		},
	})
}
