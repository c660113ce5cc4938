package natsstore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/internal/unfence"
	"github.com/artifactr/artifactr/internal/natsembed"
)

// Benchmarks print figures; none is asserted. Run with
//
//	go test -run '^$' -bench . -benchtime 2s ./events/natsstore/
//
// "nosync" runs use an embedded server with NoSync (no fsync per write: the
// speed of the protocol and the store); "fsync" runs use the durable
// default, fsync on every write.

// benchStore starts a server and a store for b.
func benchStore(b *testing.B, noSync bool) *Store {
	b.Helper()
	srv, err := natsembed.Start(natsembed.Config{
		DataDir: b.TempDir(),
		Listen:  "127.0.0.1:-1",
		NoSync:  noSync,
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Shutdown)
	return open(b, srv)
}

func syncName(noSync bool) string {
	if noSync {
		return "nosync"
	}
	return "fsync"
}

// benchRunID pads run_started to about 256 bytes encoded, the size
// NATS-NOTES measured with.
var benchRunID = strings.Repeat("r", 200)

// benchClaims claims n threads by appending a marker to each (no lease:
// only the marker matters to the fence) and returns the claims.
func benchClaims(b *testing.B, s *Store, n int) []events.Claim {
	b.Helper()
	cs := make([]events.Claim, n)
	for i := range n {
		th := fmt.Sprintf("bench-%d-%d", time.Now().UnixNano()%1e9, i)
		ev := &eventspb.Event{Thread: th, Holder: "bench", Body: &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{Holder: "bench"}}}
		ack, err := s.Append(ctxT(b), ev, events.ExpectLast(0))
		if err != nil {
			b.Fatal(err)
		}
		cs[i] = events.Claim{Thread: th, Holder: "bench", Seq: ack.Seq}
	}
	return cs
}

// benchEvent is the same run_started, fenced or with the fence dropped.
func benchEvent(c events.Claim, fenced bool) (*eventspb.Event, events.Check) {
	ev := events.NewRunStarted(c, time.Now(), benchRunID, 1, "echo")
	if fenced {
		return ev, events.Fenced(c)
	}
	unfence.Allow()
	return ev, events.Check{Mode: events.CheckUnfencedForTest, Seq: c.Seq}
}

func fencedName(fenced bool) string {
	if fenced {
		return "fenced"
	}
	return "unfenced"
}

// appendSync appends one event and waits for its ack, through Store.Append.
func appendSync(b *testing.B, s *Store, c events.Claim, fenced bool) {
	ev, chk := benchEvent(c, fenced)
	if _, err := s.Append(context.Background(), ev, chk); err != nil {
		b.Fatal(err)
	}
}

// appendAsync appends n events pipelined across the claims' threads, with
// at most one append in flight per thread (NATS-NOTES: one check-carrying
// append per thread in flight), so the window is len(cs).
func appendAsync(b *testing.B, s *Store, js jetstream.JetStream, cs []events.Claim, n int, fenced bool) {
	futs := make([]jetstream.PubAckFuture, len(cs))
	wait := func(f jetstream.PubAckFuture) {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			b.Fatal(err)
		case <-time.After(10 * time.Second):
			b.Fatal("async ack timed out")
		}
	}
	for i := range n {
		k := i % len(cs)
		if futs[k] != nil {
			wait(futs[k])
		}
		ev, chk := benchEvent(cs[k], fenced)
		w, err := s.prepareAppend(ev, chk, nil)
		if err != nil {
			b.Fatal(err)
		}
		if futs[k], err = js.PublishMsgAsync(w.msg()); err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range futs {
		if f != nil {
			wait(f)
		}
	}
}

const benchThreads = 256

func asyncJS(b *testing.B, s *Store) jetstream.JetStream {
	js, err := jetstream.New(s.nc, jetstream.WithPublishAsyncMaxPending(4*benchThreads))
	if err != nil {
		b.Fatal(err)
	}
	return js
}

// BenchmarkAppend: fenced appends against the same append without the fence
// header. sync: one writer through Store.Append, waiting for each ack.
// async: pipelined over 256 threads, one in flight per thread.
func BenchmarkAppend(b *testing.B) {
	for _, noSync := range []bool{true, false} {
		for _, fenced := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/sync1/%s", syncName(noSync), fencedName(fenced)), func(b *testing.B) {
				s := benchStore(b, noSync)
				cs := benchClaims(b, s, benchThreads)
				b.ResetTimer()
				start := time.Now()
				for i := range b.N {
					appendSync(b, s, cs[i%len(cs)], fenced)
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
			})
		}
		if !noSync {
			continue // fsync per write: the pipelined figure adds nothing
		}
		for _, fenced := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/async%d/%s", syncName(noSync), benchThreads, fencedName(fenced)), func(b *testing.B) {
				s := benchStore(b, noSync)
				cs := benchClaims(b, s, benchThreads)
				js := asyncJS(b, s)
				b.ResetTimer()
				start := time.Now()
				appendAsync(b, s, js, cs, b.N, fenced)
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
			})
		}
	}
}

// BenchmarkAppend_ratio measures fenced and unfenced appends in the same
// run, interleaved in blocks so that both see the same machine and stream
// state, and reports fenced/unfenced throughput as "ratio".
func BenchmarkAppend_ratio(b *testing.B) {
	type mode struct {
		name  string
		block int // appends per block
		run   func(b *testing.B, s *Store, js jetstream.JetStream, cs []events.Claim, n int, fenced bool)
	}
	sync1 := func(b *testing.B, s *Store, _ jetstream.JetStream, cs []events.Claim, n int, fenced bool) {
		for i := range n {
			appendSync(b, s, cs[i%len(cs)], fenced)
		}
	}
	for _, m := range []mode{{"sync1", 200, sync1}, {fmt.Sprintf("async%d", benchThreads), 8 * benchThreads, appendAsync}} {
		b.Run("nosync/"+m.name, func(b *testing.B) {
			s := benchStore(b, true)
			cs := benchClaims(b, s, benchThreads)
			js := asyncJS(b, s)
			var dur [2]time.Duration // unfenced, fenced
			b.ResetTimer()
			for i := range b.N {
				for _, fenced := range []bool{i%2 == 0, i%2 != 0} {
					start := time.Now()
					m.run(b, s, js, cs, m.block, fenced)
					if fenced {
						dur[1] += time.Since(start)
					} else {
						dur[0] += time.Since(start)
					}
				}
			}
			n := float64(b.N * m.block)
			plain, fenced := n/dur[0].Seconds(), n/dur[1].Seconds()
			b.ReportMetric(plain, "unfenced-msgs/s")
			b.ReportMetric(fenced, "fenced-msgs/s")
			b.ReportMetric(fenced/plain, "ratio")
		})
	}
}

// BenchmarkLoad replays a thread of n events (and others' events
// interleaved, one in four) and reports events/s.
func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("nosync/events=%d", n), func(b *testing.B) {
			s := benchStore(b, true)
			cs := benchClaims(b, s, 2)
			js := asyncJS(b, s)
			// Three in four events on the loaded thread, one on another.
			appendAsync(b, s, js, []events.Claim{cs[0], cs[0], cs[0], cs[1]}, n*4/3, false)
			want := len(load(b, s, cs[0].Thread))
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				envs, err := s.Load(context.Background(), cs[0].Thread, 1)
				if err != nil || len(envs) != want {
					b.Fatalf("load: %d events, err %v; want %d", len(envs), err, want)
				}
			}
			b.ReportMetric(float64(b.N*want)/time.Since(start).Seconds(), "events/s")
		})
	}
}
