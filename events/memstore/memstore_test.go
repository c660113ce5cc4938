package memstore_test

import (
	"testing"
	"time"

	"artifactr/events"
	"artifactr/events/eventstest"
	"artifactr/events/memstore"
)

func TestStore_contract(t *testing.T) {
	log := memstore.NewLog()
	eventstest.RunStore(t, eventstest.Harness{
		Open: func(t *testing.T, now func() time.Time) events.Store {
			return log.Open(memstore.Config{Now: now})
		},
		PublishRaw: func(t *testing.T, subject string, h events.Header, data []byte) {
			log.PublishRaw(subject, h, data)
		},
	})
}
