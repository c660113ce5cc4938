package memstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/memstore"
)

func TestStore_firstPosts(t *testing.T) {
	for _, p := range []int{1, 4} {
		t.Run(fmt.Sprintf("P%d", p), func(t *testing.T) {
			log := memstore.NewLog()
			subj := events.Subjects{Partitions: p}
			eventstest.RunFirstPosts(t, eventstest.FirstPostHarness{
				Harness: eventstest.Harness{
					Subjects: subj,
					Open: func(t *testing.T, now func() time.Time) events.Store {
						return log.Open(memstore.Config{Now: now, Subjects: subj})
					},
					PublishRaw: func(t *testing.T, subject string, h events.Header, data []byte) {
						log.PublishRaw(subject, h, data)
					},
				},
				Forge: func(t *testing.T, thread, id string, seq uint64) {
					if !log.ForgeFirstPost(thread, id, seq) {
						t.Fatalf("forge %s %s: an entry is there", thread, id)
					}
				},
			})
		})
	}
}
