package audit

import (
	"os"
	"runtime"
	"testing"
	"time"

	"artifactr/events"
	"artifactr/projections/internal/eventgen"
)

func TestZZScale(t *testing.T) {
	if os.Getenv("ZZ") == "" {
		t.Skip()
	}
	l, _ := randomLog(9, eventgen.Config{Threads: 10000, Events: 1_000_000})
	msgs := l.Msgs
	l.Envs = nil
	runtime.GC()
	rate := func(f func()) float64 {
		st := time.Now()
		f()
		return float64(len(msgs)) / time.Since(st).Seconds()
	}
	dec := func() {
		for i := range msgs {
			m := &msgs[i]
			_ = events.Decode(events.Subjects{}, m.Subject, m.Seq, eventgen.Base, m.Header, m.Data)
		}
	}
	both := func() {
		a := New()
		for i := range msgs {
			m := &msgs[i]
			a.Add(events.Decode(events.Subjects{}, m.Subject, m.Seq, eventgen.Base, m.Header, m.Data))
		}
		if !a.Report().OK() {
			t.Fatal("not ok")
		}
	}
	var bd, bb float64
	for range 7 {
		bd = max(bd, rate(dec))
		bb = max(bb, rate(both))
	}
	t.Logf("1M events, 10k threads, best of 7: decode %.0f ev/s, decode+audit %.0f ev/s, ratio %.2f", bd, bb, bb/bd)
}

func BenchmarkZZBoth(b *testing.B) {
	l, _ := randomLog(9, eventgen.Config{Threads: 10000, Events: 1_000_000})
	msgs := l.Msgs
	l.Envs = nil
	b.ResetTimer()
	for b.Loop() {
		a := New()
		for i := range msgs {
			m := &msgs[i]
			a.Add(events.Decode(events.Subjects{}, m.Subject, m.Seq, eventgen.Base, m.Header, m.Data))
		}
	}
	reportRate(b, len(msgs))
}
