package natsstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// BenchmarkAppend_guard is the cost of the guard: one consuming append
// (steering_given, fenced) after another on one thread, waiting for each
// ack, plain (events.Fenced) and guarded (events.FencedGuarded, an atomic
// batch of the guard and the event), on a single-replica file stream
// (nosync and fsync) and on an R3 file stream of an in-process 3-node
// cluster (nosync, as natsembedtest's cluster runs):
//
//	go test -run '^$' -bench Append_guard -benchtime 3s ./events/natsstore/
func BenchmarkAppend_guard(b *testing.B) {
	for _, where := range []string{"R1-nosync", "R1-fsync", "R3"} {
		for _, guarded := range []bool{false, true} {
			name := where + "/plain"
			if guarded {
				name = where + "/guarded"
			}
			b.Run(name, func(b *testing.B) {
				s := benchGuardStore(b, where)
				cs := benchClaims(b, s, 1)
				c := cs[0]
				run := uint64(0)
				chk := events.Fenced(c)
				b.ResetTimer()
				for i := range b.N {
					if guarded {
						chk = events.FencedGuarded(c, run)
					}
					ack, err := s.Append(context.Background(), events.NewSteeringGiven(c, time.Now(), "r1", uint64(i+1)), chk)
					if err != nil {
						b.Fatal(err)
					}
					run = ack.Seq
				}
			})
		}
	}
}

// benchGuardStore opens a store with Guard on where says: R1-nosync,
// R1-fsync or R3.
func benchGuardStore(b *testing.B, where string) *Store {
	b.Helper()
	switch where {
	case "R1-nosync", "R1-fsync":
		s := benchStore(b, where == "R1-nosync")
		s2, err := New(ctxT(b), Config{Conn: s.nc, Guard: GuardOn})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s2.Close() })
		return s2
	case "R3":
		c := natsembedtest.StartCluster(b, 3)
		nc, err := nats.Connect(c.ClientURLs(), nats.MaxReconnects(-1))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		s, err := New(ctxT(b), Config{Conn: nc, Replicas: 3, Timeout: 10 * time.Second, Guard: GuardOn})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		c.WaitForStreamLeader(DefaultStream, 30*time.Second)
		return s
	}
	panic(fmt.Sprintf("benchGuardStore: %q", where))
}
