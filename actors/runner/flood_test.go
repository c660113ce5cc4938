//go:build linux

package runner_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	agentexec "github.com/artifactr/artifactr/actors/agent/exec"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
)

// floodAgent prints 200,000 output lines of 100 bytes of text (20 MB) for
// a prompt "flood", then done; for any other prompt it answers "ok".
const floodAgent = `read -r line
case "$line" in
*'"text":"flood","role":"user"},"history"'*)
	awk 'BEGIN { for (i = 0; i < 200000; i++) printf "{\"type\":\"output\",\"text\":\"%0100d\"}\n", i }'
	echo '{"type":"done"}' ;;
*) echo '{"type":"done","output":"ok"}' ;;
esac
`

// Issue 23: an exec agent printing 200,000 lines made one turn write
// 230,871 events, serve hold 372 MB, and the run outlast its timeout. Now
// its outputs are coalesced, its budget ends the run, and Emit holds it to
// the store's pace: the run ends, with a bounded number of events and
// bounded memory, and the thread goes on. The figures are printed.
func TestRunner_floodingExecAgent(t *testing.T) {
	tests := []struct {
		name      string
		maxBytes  int
		wantState projections.RunStatus
		maxEvents int    // run_output events at most
		maxHeap   uint64 // live heap growth at most
	}{
		// The default budget, 8 MiB, ends the flood. Outputs are 16 KiB,
		// or less when the 50 ms flush comes first (a loaded machine):
		// twice as many as the size alone makes is the bound.
		{"default budget", 0, projections.RunFailed, 2 * agentexec.DefaultMaxOutputBytes / (16 << 10), 64 << 20},
		// A budget above the flood: coalescing alone bounds the events.
		{"budget above the flood", 32 << 20, projections.RunCompleted, 2 * 20_000_000 / (16 << 10), 96 << 20},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			if tc.maxBytes > 0 && raceDetector {
				t.Skip("20 MB through the race detector takes 20s; run it without: go test -run TestRunner_floodingExecAgent ./actors/runner/")
			}
			srv := natsembedtest.RunForTest(t)
			s, err := natsstore.New(t.Context(), natsstore.Config{URL: srv.ClientURL()})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ag := agentexec.Agent{Path: "/bin/sh", Args: []string{"-c", floodAgent}, Timeout: 60 * time.Second, MaxOutputBytes: tc.maxBytes}
			r := startRunner(t, runner.Config{Store: s, Agent: ag, ClaimTTL: 3 * time.Second})
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := r.Stop(ctx); err != nil {
					t.Errorf("stop: %v", err)
				}
			}()

			th := "flood"
			w := &runWatch{s: s, th: th, from: 1}
			mem := startHeapSampler()
			start := time.Now()
			post(t, s, th, "flood")
			testkit.WaitFor(t, 300*time.Second, "the flood's run ends", w.ended(1))
			took := time.Since(start)
			mem.stop()

			run := w.runs[0]
			t.Logf("flood (%s): run %s after %s, %d run_output events, %d bytes of output, %d events in the thread; "+
				"live heap %.1f MiB before, %.1f MiB at most (+%.1f MiB retained); heap objects at most %.1f MiB (+%.1f MiB, garbage included); process peak RSS (VmHWM) %s",
				tc.name, run.status, took.Round(time.Millisecond), run.outputs, run.bytes, w.from-1,
				mib(mem.base), mib(mem.peak), mib(mem.peak-mem.base), mib(mem.inuse), mib(mem.inuse-mem.inuseBase), vmHWM())
			if run.status != tc.wantState {
				t.Errorf("run %s (%s), want %s", run.status, run.reason, tc.wantState)
			}
			if tc.wantState == projections.RunFailed && !strings.Contains(run.reason, "budget of 8388608 bytes") {
				t.Errorf("reason %q, want the byte budget", run.reason)
			}
			if run.outputs > tc.maxEvents {
				t.Errorf("%d run_output events, want at most %d", run.outputs, tc.maxEvents)
			}
			// Generous: before the fix the live heap grew by hundreds of
			// MiB.
			// What is left is mostly the store's cache and the claimed
			// thread's view, which holds the run's outputs (so the
			// budget bounds it).
			if grown := mem.peak - mem.base; grown > tc.maxHeap {
				t.Errorf("the live heap grew by %.1f MiB during the flood, want under %.0f MiB", mib(grown), mib(tc.maxHeap))
			}

			post(t, s, th, "next")
			testkit.WaitFor(t, 60*time.Second, "the next message runs", w.ended(2))
			if next := w.runs[1]; next.status != projections.RunCompleted || next.output != "ok" {
				t.Errorf("next run %s %q: %s", next.status, next.output, next.reason)
			}
		})
	}
}

// runWatch follows a thread's runs, reading only the events it has not
// read yet, so that waiting costs the heap being measured little.
type runWatch struct {
	s    events.Store
	th   string
	from uint64
	runs []watchedRun
	cur  watchedRun
}

type watchedRun struct {
	status         projections.RunStatus
	output, reason string
	outputs, bytes int
}

// ended reports whether the thread's n-th run ended.
func (w *runWatch) ended(n int) func() (bool, string) {
	return func() (bool, string) {
		envs, err := w.s.Load(context.Background(), w.th, w.from)
		if err != nil {
			return false, err.Error()
		}
		for _, env := range envs {
			w.from = env.Seq + 1
			switch b := env.Event.GetBody().(type) {
			case *eventspb.Event_RunOutput:
				w.cur.outputs++
				w.cur.bytes += len(b.RunOutput.GetText())
			case *eventspb.Event_RunCompleted:
				w.cur.status, w.cur.output = projections.RunCompleted, b.RunCompleted.GetOutput()
			case *eventspb.Event_RunFailed:
				w.cur.status, w.cur.reason = projections.RunFailed, b.RunFailed.GetReason()
			case *eventspb.Event_RunAbandoned:
				w.cur.status, w.cur.reason = projections.RunAbandoned, b.RunAbandoned.GetReason()
			default:
				continue
			}
			if w.cur.status != "" {
				w.runs = append(w.runs, w.cur)
				w.cur = watchedRun{}
			}
		}
		return len(w.runs) >= n, fmt.Sprintf("%d runs ended, up to seq %d", len(w.runs), w.from-1)
	}
}

// heapSampler records the peak of the heap: of the live heap, marked by a
// GC every 20 ms (what is retained), and of the heap objects (garbage not
// yet collected included).
type heapSampler struct {
	quit             chan struct{}
	wg               sync.WaitGroup
	base, peak       uint64 // live
	inuseBase, inuse uint64
}

func readHeap() (live, inuse uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

func startHeapSampler() *heapSampler {
	runtime.GC()
	h := &heapSampler{quit: make(chan struct{})}
	h.base, h.inuseBase = readHeap()
	h.peak, h.inuse = h.base, h.inuseBase
	h.wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-h.quit:
				return
			case <-t.C:
				// A GC marks what is live now, not at the last cycle.
				_, inuse := readHeap()
				runtime.GC()
				live, _ := readHeap()
				h.peak, h.inuse = max(h.peak, live), max(h.inuse, inuse)
			}
		}
	})
	return h
}

func (h *heapSampler) stop() {
	close(h.quit)
	h.wg.Wait()
	// The last GC's mark may predate the end of the flood.
	runtime.GC()
	live, _ := readHeap()
	h.peak = max(h.peak, live)
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// vmHWM is the process's peak resident set, as /proc says.
func vmHWM() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// burstAgent emits n texts of 1 KiB as fast as Emit returns, and records
// after each how many run_output appends had begun.
type burstAgent struct {
	n       int
	begun   *atomic.Int64
	maxLead chan int64 // the most Emits returned ahead of the appends
}

func (burstAgent) Name() string    { return "burst" }
func (burstAgent) Steerable() bool { return false }
func (a burstAgent) Run(ctx context.Context, t agent.Turn) (string, error) {
	text := strings.Repeat("x", 1024)
	var lead int64
	for i := 1; i <= a.n; i++ {
		if err := t.Emit(ctx, text); err != nil {
			return "", err
		}
		lead = max(lead, int64(i)-a.begun.Load())
	}
	a.maxLead <- lead
	return "", nil
}

// Emit holds an agent to the store's pace: it returns once the run's
// output not yet written is at most 64 KiB, so an agent cannot queue more
// than that in the actor.
func TestRunner_emitWaitsForTheStore(t *testing.T) {
	s := memstore.New(memstore.Config{})
	var begun atomic.Int64
	ag := burstAgent{n: 1000, begun: &begun, maxLead: make(chan int64, 1)}
	r := startRunner(t, runner.Config{Store: s, Agent: ag, ClaimTTL: 2 * time.Second,
		BeforeAppend: func(_ context.Context, ev *eventspb.Event) {
			if ev.GetRunOutput() != nil {
				begun.Add(1)
				time.Sleep(100 * time.Microsecond) // a store slower than the agent
			}
		}})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	post(t, s, "burst", "go")
	lead := <-ag.maxLead
	t.Logf("Emits returned at most %d ahead of the appends", lead)
	// 64 KiB of 1 KiB outputs, plus the one in flight.
	if lead > 66 {
		t.Errorf("Emit returned %d outputs ahead of the appends; want at most 66", lead)
	}
	testkit.WaitFor(t, 30*time.Second, "the run completes", settled(t, s, "burst"))
}
