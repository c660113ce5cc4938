package audit

import (
	"sync"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/eventgen"
)

// benchLog is a clean synthetic log of 200k events across 2000 threads,
// interleaved at random, made once.
var benchLog = sync.OnceValue(func() *eventgen.Log {
	l, _ := randomLog(42, eventgen.Config{Threads: 2000, Events: 200_000})
	return l
})

func reportRate(b *testing.B, n int) {
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(0, "ns/op") // per log, not per event: events/s is the figure
}

// BenchmarkAuditor_Add audits decoded envelopes: the audit's own cost.
func BenchmarkAuditor_Add(b *testing.B) {
	envs := benchLog().Envs
	b.ReportAllocs()
	for b.Loop() {
		a := New()
		for i := range envs {
			a.Add(envs[i])
		}
		if r := a.Report(); !r.OK() {
			b.Fatal("benchmark log is not clean")
		}
	}
	reportRate(b, len(envs))
}

// BenchmarkDecode is the raw read rate in process: decoding the stored
// messages, which every reader of the log pays.
func BenchmarkDecode(b *testing.B) {
	msgs := benchLog().Msgs
	b.ReportAllocs()
	for b.Loop() {
		for i := range msgs {
			m := &msgs[i]
			env := events.Decode(events.Subjects{}, m.Subject, m.Seq, eventgen.Base, m.Header, m.Data)
			if env.Err != nil {
				b.Fatal(env.Err)
			}
		}
	}
	reportRate(b, len(msgs))
}

// BenchmarkAuditor_DecodeAndAdd reads and audits: compare its events/s with
// BenchmarkDecode's for the audit's overhead over a raw read.
func BenchmarkAuditor_DecodeAndAdd(b *testing.B) {
	msgs := benchLog().Msgs
	b.ReportAllocs()
	for b.Loop() {
		a := New()
		for i := range msgs {
			m := &msgs[i]
			a.Add(events.Decode(events.Subjects{}, m.Subject, m.Seq, eventgen.Base, m.Header, m.Data))
		}
		if r := a.Report(); !r.OK() {
			b.Fatal("benchmark log is not clean")
		}
	}
	reportRate(b, len(msgs))
}
