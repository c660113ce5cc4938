package memstore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/memstore"
)

func TestStore_strategies(t *testing.T) {
	for _, p := range []int{1, 4} {
		for _, mode := range []memstore.Mode{memstore.Replicated, memstore.Single} {
			t.Run(fmt.Sprintf("P%d/%s", p, strings.Fields(mode.String())[0]), func(t *testing.T) {
				log := memstore.NewLogWith(memstore.LogConfig{Mode: mode})
				subj := events.Subjects{Partitions: p}
				eventstest.RunStrategies(t, eventstest.Harness{
					Subjects: subj,
					Open: func(t *testing.T, now func() time.Time) events.Store {
						return log.Open(memstore.Config{Now: now, Subjects: subj})
					},
				})
			})
		}
	}
}
