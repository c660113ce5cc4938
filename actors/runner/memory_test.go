package runner_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
)

// BenchmarkRunner_idleThreadHeap reports the Go heap per claimed idle
// thread: actor, core, view, routing entries and idle timer, and the
// in-memory log's own events (about five per thread). The server's share is
// not in it; bench scale measures runner and server together.
//
//	go test -run '^$' -bench idleThreadHeap -benchtime 1x ./actors/runner/
func BenchmarkRunner_idleThreadHeap(b *testing.B) {
	const n = 10000
	for range b.N {
		s := memstore.New(memstore.Config{})
		r, err := runner.New(runner.Config{Store: s, ID: "mem", IdleTimeout: time.Hour, Logger: testLogger()})
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		before := heap()
		for i := range n {
			if _, err := s.Post(context.Background(), fmt.Sprintf("t%d", i), &eventspb.MessagePosted{Author: "bench", Text: "hello"}); err != nil {
				b.Fatal(err)
			}
		}
		deadline := time.Now().Add(2 * time.Minute)
		for r.Stats().Completed < n {
			if time.Now().After(deadline) {
				b.Fatalf("only %+v after 2m", r.Stats())
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond) // the run ends land
		after := heap()
		logHeld := float64(s.Log().Len()) // the log itself is in the heap too
		b.ReportMetric(float64(after-before)/n, "heap-bytes/thread")
		b.ReportMetric(logHeld/n, "events/thread")
		r.Kill()
	}
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
