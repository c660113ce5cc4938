package spec_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// property is the rapid property: a fresh thread, then random spec actions,
// with the invariants checked after every step.
func property(b backend, unfenced bool) func(*rapid.T) {
	return func(t *rapid.T) {
		m := newMachine(t, b, unfenced)
		t.Repeat(m.actions())
	}
}

// memBackend gives each iteration a fresh in-memory log.
func memBackend() backend {
	return backend{name: "memstore", seen: make(map[string]int), open: func(clocks []*eventstest.Clock) ([]events.Store, events.Store) {
		log := memstore.NewLog()
		stores := make([]events.Store, len(clocks))
		for i, c := range clocks {
			stores[i] = log.Open(memstore.Config{Now: c.Now})
		}
		return stores, log.Open(memstore.Config{})
	}}
}

// natsBackend starts one JetStream server for t and opens one connection
// per claimant, as separate processes would have. Each iteration uses a new
// thread on the same stream and bucket, and the handles read that
// iteration's clocks.
func natsBackend(t *testing.T) backend {
	t.Helper()
	srv := natsembedtest.RunForTest(t)
	cur := make([]*eventstest.Clock, numProcs) // the current iteration's clocks
	open := func(now func() time.Time) events.Store {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := natsstore.New(ctx, natsstore.Config{URL: srv.ClientURL(), Now: now})
		if err != nil {
			t.Fatalf("natsstore.New: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	stores := make([]events.Store, numProcs)
	for i := range stores {
		stores[i] = open(func() time.Time { return cur[i].Now() })
	}
	reader := open(time.Now)
	return backend{name: "natsstore", seen: make(map[string]int), open: func(clocks []*eventstest.Clock) ([]events.Store, events.Store) {
		copy(cur, clocks)
		return stores, reader
	}}
}

// Spec: I1_ConsumedAtMostOnce, I3_OneActiveRun, on the in-memory store.
func TestRapid_memstore(t *testing.T) {
	b := memBackend()
	rapid.Check(t, property(b, false))
	t.Logf("outcomes: %v", b.seen)
}

// Spec: I1_ConsumedAtMostOnce, I3_OneActiveRun, on JetStream. 30 checks
// unless -rapid.checks says otherwise.
func TestRapid_natsstore(t *testing.T) {
	b := natsBackend(t)
	setRapidFlag(t, "rapid.checks", "30", false)
	rapid.Check(t, property(b, false))
	t.Logf("outcomes: %v", b.seen)
}

// TestRapid_unfencedControl runs the same property with the fence switched
// off (eventstest.Unfenced): rapid must find a sequence that breaks I1 or
// I3, and shrink it. A property that cannot fail proves nothing. The seed
// is fixed (-rapid.seed overrides it), so the control is deterministic on
// the in-memory store.
func TestRapid_unfencedControl(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    func(t *testing.T) backend
		// shrink bounds the time rapid spends shrinking: each try on
		// JetStream is a round of real appends.
		shrink string
	}{
		{"memstore", func(*testing.T) backend { return memBackend() }, "20s"},
		{"natsstore", natsBackend, "2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setRapidFlag(t, "rapid.nofailfile", "true", true)
			setRapidFlag(t, "rapid.seed", "1", false)
			setRapidFlag(t, "rapid.shrinktime", tc.shrink, false)
			out, failed := capture(t.Name(), property(tc.b(t), true))
			if !failed {
				t.Fatalf("without the fence rapid found no violation: the property cannot fail\n%s", out)
			}
			if !strings.Contains(out, "I1_ConsumedAtMostOnce") && !strings.Contains(out, "I3_OneActiveRun") {
				t.Fatalf("without the fence the property failed, but not on I1 or I3:\n%s", out)
			}
			t.Logf("without the fence rapid finds, and shrinks to:\n%s", out)
		})
	}
}

// capture runs rapid.Check on prop into a recording rapid.TB and returns
// what rapid printed and whether the property failed.
func capture(name string, prop func(*rapid.T)) (string, bool) {
	tb := &recorder{name: name}
	rapid.Check(tb, prop)
	return tb.out.String(), tb.failed
}

// recorder is a rapid.TB that records instead of failing a test. rapid only
// logs, reports errors and, at the end of a failed check, calls FailNow.
type recorder struct {
	name   string
	failed bool
	out    strings.Builder
}

func (r *recorder) Helper()                    {}
func (r *recorder) Name() string               { return r.name }
func (r *recorder) Logf(f string, args ...any) { fmt.Fprintf(&r.out, f+"\n", args...) }
func (r *recorder) Log(args ...any)            { fmt.Fprintln(&r.out, args...) }
func (r *recorder) Errorf(f string, args ...any) {
	r.failed = true
	r.Logf(f, args...)
}
func (r *recorder) Error(args ...any)            { r.failed = true; r.Log(args...) }
func (r *recorder) Fatalf(f string, args ...any) { r.Errorf(f, args...) }
func (r *recorder) Fatal(args ...any)            { r.Error(args...) }
func (r *recorder) Skipf(f string, args ...any)  { r.Logf(f, args...) }
func (r *recorder) Skip(args ...any)             { r.Log(args...) }
func (r *recorder) SkipNow()                     {}
func (r *recorder) FailNow()                     { r.failed = true }
func (r *recorder) Fail()                        { r.failed = true }
func (r *recorder) Failed() bool                 { return r.failed }

// cmdline holds the flags given on the command line, read before any test
// sets one: flag.Visit counts flag.Set calls too.
var (
	cmdlineOnce sync.Once
	cmdline     = make(map[string]bool)
)

// setRapidFlag sets one of rapid's flags for the rest of t, then restores
// it. A flag given on the command line, or in its RAPID_* environment
// variable, wins unless force is set.
func setRapidFlag(t *testing.T, name, value string, force bool) {
	t.Helper()
	f := flag.Lookup(name)
	if f == nil {
		t.Fatalf("no flag -%s", name)
	}
	cmdlineOnce.Do(func() { flag.Visit(func(g *flag.Flag) { cmdline[g.Name] = true }) })
	env := "RAPID_" + strings.ToUpper(strings.TrimPrefix(name, "rapid."))
	if _, inEnv := os.LookupEnv(env); (cmdline[name] || inEnv) && !force {
		return
	}
	old := f.Value.String()
	if err := flag.Set(name, value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set(name, old) })
}
