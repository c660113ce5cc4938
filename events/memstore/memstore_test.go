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

// The contract holds in both modes: deduplication before the check (R3)
// and after it (R1).
// It holds on one partition and on four, each with its own sequences.
func TestStore_contract(t *testing.T) {
	for _, p := range []int{1, 4} {
		for _, mode := range []memstore.Mode{memstore.Replicated, memstore.Single} {
			t.Run(fmt.Sprintf("P%d/%s", p, strings.Fields(mode.String())[0]), func(t *testing.T) {
				clock := eventstest.NewClock(0)
				log := memstore.NewLogWith(memstore.LogConfig{Mode: mode, Now: clock.Now})
				subj := events.Subjects{Partitions: p}
				eventstest.RunStore(t, eventstest.Harness{
					Subjects: subj,
					Open: func(t *testing.T, now func() time.Time) events.Store {
						return log.Open(memstore.Config{Now: now, Subjects: subj})
					},
					PublishRaw: func(t *testing.T, subject string, h events.Header, data []byte) {
						log.PublishRaw(subject, h, data)
					},
					ExpireDuplicates: func(t *testing.T) { clock.Advance(memstore.DefaultDuplicateWindow) },
				})
			})
		}
	}
}

func TestStore_race(t *testing.T) {
	for _, p := range []int{1, 4} {
		t.Run(fmt.Sprintf("P%d", p), func(t *testing.T) { testRace(t, p) })
	}
}

func testRace(t *testing.T, partitions int) {
	log := memstore.NewLog()
	res := eventstest.RunRace(t, func(now func() time.Time) events.Store {
		return log.Open(memstore.Config{Now: now, Subjects: events.Subjects{Partitions: partitions}})
	}, eventstest.DefaultRace)
	t.Logf("landed %d, refused %d, events %d", res.Landed, res.Refused, res.Report.Events)
	if !res.Report.OK() || res.Safety != 0 {
		t.Fatalf("violations with the fence: %+v", res.Report.Violations)
	}
	if res.Refused == 0 || res.Landed == 0 {
		t.Fatalf("landed %d refused %d: the race did not race", res.Landed, res.Refused)
	}
}

// The control run: without the fence the same race must be caught.
func TestStore_raceUnfencedControl(t *testing.T) {
	log := memstore.NewLog()
	res := eventstest.RunRace(t, func(now func() time.Time) events.Store {
		return eventstest.Unfenced(log.Open(memstore.Config{Now: now}))
	}, eventstest.DefaultRace)
	t.Logf("landed %d, refused %d, I1/I3 violations %d of %d", res.Landed, res.Refused, res.Safety, len(res.Report.Violations))
	if res.Safety == 0 {
		t.Fatal("the audit found no I1 or I3 violation without the fence: the verifier cannot fail")
	}
}

// memstore always guards: the guard's contract in both modes.
func TestStore_guarded(t *testing.T) {
	for _, p := range []int{1, 4} {
		for _, mode := range []memstore.Mode{memstore.Replicated, memstore.Single} {
			t.Run(fmt.Sprintf("P%d/%s", p, strings.Fields(mode.String())[0]), func(t *testing.T) {
				log := memstore.NewLogWith(memstore.LogConfig{Mode: mode})
				subj := events.Subjects{Partitions: p}
				eventstest.RunGuarded(t, eventstest.Harness{
					Subjects: subj,
					Open: func(t *testing.T, now func() time.Time) events.Store {
						return log.Open(memstore.Config{Now: now, Subjects: subj})
					},
					PublishRaw: func(t *testing.T, subject string, h events.Header, data []byte) {
						log.PublishRaw(subject, h, data)
					},
				})
			})
		}
	}
}

// The RUNFENCE layout's contract (events.Subjects.RunFence), before and
// after deduplication, on one partition and on four.
func TestStore_contractRunFence(t *testing.T) {
	for _, p := range []int{1, 4} {
		for _, mode := range []memstore.Mode{memstore.Replicated, memstore.Single} {
			t.Run(fmt.Sprintf("P%d/%s", p, strings.Fields(mode.String())[0]), func(t *testing.T) {
				log := memstore.NewLogWith(memstore.LogConfig{Mode: mode})
				subj := events.Subjects{Partitions: p, RunFence: true}
				eventstest.RunRunFence(t, eventstest.Harness{
					Subjects: subj,
					Open: func(t *testing.T, now func() time.Time) events.Store {
						return log.Open(memstore.Config{Now: now, Subjects: subj})
					},
					PublishRaw: func(t *testing.T, subject string, h events.Header, data []byte) {
						log.PublishRaw(subject, h, data)
					},
				})
			})
		}
	}
}
