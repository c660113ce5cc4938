package natsstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
)

// BenchmarkAppendBatch_ratio measures, in the same run and interleaved in
// blocks of the same number of events (so all see the same machine and
// stream state), on a nosync server:
//   - batched: fenced run_started events sent by one writer as atomic
//     batches of k through Store.AppendBatch, one thread per batch;
//   - sync1: the same events unfenced, one by one through Store.Append;
//   - async256: the same events unfenced, pipelined over 256 threads.
//
// It reports each throughput in events/s and the per-event ratios
// batched/sync1 and batched/async256. Figures are printed, never asserted.
func BenchmarkAppendBatch_ratio(b *testing.B) {
	const block = 1024 // events per block and mode
	for _, k := range []int{8, 32} {
		b.Run(fmt.Sprintf("nosync/k=%d", k), func(b *testing.B) {
			s := benchStore(b, true)
			cs := benchClaims(b, s, benchThreads)
			js := asyncJS(b, s)
			modes := []struct {
				name string
				run  func()
			}{
				{"batched", func() { appendBatched(b, s, cs, block, k) }},
				{"sync1", func() {
					for i := range block {
						appendSync(b, s, cs[i%len(cs)], false)
					}
				}},
				{"async256", func() { appendAsync(b, s, js, cs, block, false) }},
			}
			dur := make([]time.Duration, len(modes))
			b.ResetTimer()
			for i := range b.N {
				// Rotate the order so no mode always runs first.
				for j := range modes {
					m := (i + j) % len(modes)
					start := time.Now()
					modes[m].run()
					dur[m] += time.Since(start)
				}
			}
			n := float64(b.N * block)
			rate := make([]float64, len(modes))
			for m := range modes {
				rate[m] = n / dur[m].Seconds()
				b.ReportMetric(rate[m], modes[m].name+"-msgs/s")
			}
			b.ReportMetric(rate[0]/rate[1], "ratio-batched/sync1")
			b.ReportMetric(rate[0]/rate[2], "ratio-batched/async256")
		})
	}
}

// appendBatched appends n fenced events as batches of k, one writer, each
// batch to the next thread in turn.
func appendBatched(b *testing.B, s *Store, cs []events.Claim, n, k int) {
	items := make([]BatchItem, k)
	for i := 0; i < n; i += k {
		c := cs[(i/k)%len(cs)]
		items = items[:min(k, n-i)]
		for j := range items {
			ev, chk := benchEvent(c, true)
			items[j] = BatchItem{Event: ev, Check: chk}
		}
		if _, err := s.AppendBatch(context.Background(), items); err != nil {
			b.Fatal(err)
		}
	}
}
