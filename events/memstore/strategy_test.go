package memstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/memstore"
)

func TestStore_strategies(t *testing.T) {
	for _, mode := range []memstore.Mode{memstore.Replicated, memstore.Single} {
		t.Run(strings.Fields(mode.String())[0], func(t *testing.T) {
			log := memstore.NewLogWith(memstore.LogConfig{Mode: mode})
			eventstest.RunStrategies(t, eventstest.Harness{
				Open: func(t *testing.T, now func() time.Time) events.Store {
					return log.Open(memstore.Config{Now: now})
				},
			})
		})
	}
}
