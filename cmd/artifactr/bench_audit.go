package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/eventgen"
	"github.com/artifactr/artifactr/projections/audit"
)

// benchAuditFlags are `bench audit` options.
type benchAuditFlags struct {
	events  int
	threads int
	rounds  int
	seed    uint64
	maxTime time.Duration
	profile string // CPU profile of the reads, for tuning
	json    bool
	result  benchAuditJSON
}

func (a *app) benchAuditCommand() *cobra.Command {
	var f benchAuditFlags
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "The audit's events/s against the raw read rate of the same stream",
		Long: `Start an embedded server in a temporary directory (writes not fsynced) and
fill the stream with --events realistic events (about 256 bytes each) across
--threads threads, published asynchronously with the headers real appends
carry: claims, runs with outputs, requests answered by posts, steering,
failures, releases and takeovers that abandon runs. The log is clean, so the
audit must find no violation and no anomaly.

Then, --rounds times, read the whole stream twice with the same reader
(natsstore Replay: one ordered consumer, large pulls): once raw, touching
each message without decoding it, and once decoding every event and feeding
it to the audit (projections/audit), alternating which goes first. Prints
both rates, best of the rounds, their ratio, the median of the rounds'
ratios, and the rates per CPU-second of this process (the server is
embedded in it), which other load on the machine disturbs less. Figures
only: nothing is asserted but the audit's verdict.

--json prints the figures as one object at the end (the text lines go to
stderr): {"events","threads","raw_events_per_second",
"audit_events_per_second","ratio","violations","anomalies"}.`,
		Example: `  artifactr bench audit --events 1000000`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.events < 1 || f.threads < 1 || f.rounds < 1 {
				return usagef("--events, --threads and --rounds must be at least 1")
			}
			if f.maxTime <= 0 {
				return usagef("--max-time must be positive")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.maxTime)
			defer cancel()
			var jsonOut io.Writer
			if f.json {
				jsonOut = a.jsonMode()
			}
			if err := a.benchAudit(ctx, &f); err != nil {
				return fail(fmt.Errorf("bench audit: %w", err))
			}
			if f.json {
				return writeJSON(jsonOut, f.result)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.events, "events", 1_000_000, "events to generate")
	fl.IntVar(&f.threads, "threads", 1000, "threads the events are spread over")
	fl.IntVar(&f.rounds, "rounds", 5, "read the stream this many times each way, alternating which goes first; the best rate counts")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the generated log")
	fl.DurationVar(&f.maxTime, "max-time", 15*time.Minute, "give up after this long")
	fl.StringVar(&f.profile, "cpuprofile", "", "write a CPU profile of the reads to this file")
	_ = fl.MarkHidden("cpuprofile")
	fl.BoolVar(&f.json, "json", false, "print the figures as one JSON object")
	return cmd
}

func (a *app) benchAudit(ctx context.Context, f *benchAuditFlags) error {
	ts, err := a.startTempServer(ctx, "artifactr-bench-audit-", true, nil)
	if err != nil {
		return err
	}
	defer ts.Close()
	srv, store := ts.srv, ts.store
	fmt.Fprintf(a.stdout, "bench audit: %d events across %d threads, embedded server (not fsynced), %d CPUs, GOMAXPROCS %d\n",
		f.events, f.threads, runtime.NumCPU(), runtime.GOMAXPROCS(0))

	start := time.Now()
	size, err := generateLog(ctx, srv.ClientURL(), f)
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	gen := time.Since(start)
	fmt.Fprintf(a.stdout, "generate: %d events in %s (%.0f events/s), %.0f bytes of payload per event on average\n",
		f.events, gen.Round(time.Millisecond), float64(f.events)/gen.Seconds(), size)
	if last, err := store.LastStreamSeq(ctx); err != nil || last != uint64(f.events) {
		return fmt.Errorf("stream holds %d events, want %d (err %v)", last, f.events, err)
	}
	if f.profile != "" {
		pf, err := os.Create(f.profile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	var bestRaw, bestAudit readRate
	var report audit.Report
	var ratios []float64
	for round := 1; round <= f.rounds; round++ {
		readRawOnce := func() (readRate, error) {
			return timeRead(ctx, f.events, func() (int, error) { return readRaw(ctx, store) })
		}
		auditOnce := func() (readRate, error) {
			return timeRead(ctx, f.events, func() (int, error) {
				var n int
				var err error
				report, n, err = auditAll(ctx, store)
				return n, err
			})
		}
		// Alternate which goes first, so that neither always reads the
		// server's warmer caches.
		var raw, aud readRate
		var err error
		if round%2 == 1 {
			if raw, err = readRawOnce(); err == nil {
				aud, err = auditOnce()
			}
		} else {
			if aud, err = auditOnce(); err == nil {
				raw, err = readRawOnce()
			}
		}
		if err != nil {
			return err
		}
		ratios = append(ratios, aud.wall/raw.wall)
		fmt.Fprintf(a.stdout, "round %d: raw read %.0f events/s (%.0f per CPU-second), audit %.0f events/s (%.0f per CPU-second): ratio %.2f\n",
			round, raw.wall, raw.cpu, aud.wall, aud.cpu, aud.wall/raw.wall)
		bestRaw.wall, bestRaw.cpu = max(bestRaw.wall, raw.wall), max(bestRaw.cpu, raw.cpu)
		bestAudit.wall, bestAudit.cpu = max(bestAudit.wall, aud.wall), max(bestAudit.cpu, aud.cpu)
	}
	slices.Sort(ratios)
	fmt.Fprintf(a.stdout, "raw:     %.0f events/s reading the whole stream (natsstore ReplayRaw: ordered consumer, no decode), best of %d; %.0f per CPU-second\n",
		bestRaw.wall, f.rounds, bestRaw.cpu)
	fmt.Fprintf(a.stdout, "audit:   %.0f events/s reading, decoding and auditing it (natsstore Replay + projections/audit), best of %d; %.0f per CPU-second\n",
		bestAudit.wall, f.rounds, bestAudit.cpu)
	fmt.Fprintf(a.stdout, "ratio:   audit / raw = %.2f best of each (median of the rounds' ratios %.2f; per CPU-second %.2f)\n",
		bestAudit.wall/bestRaw.wall, ratios[len(ratios)/2], bestAudit.cpu/bestRaw.cpu)
	fmt.Fprintf(a.stdout, "verdict: %d events, %d threads, %d violations, %d anomalies\n", report.Events, report.Threads, report.ViolationCount, report.AnomalyCount)
	f.result = benchAuditJSON{Events: report.Events, Threads: report.Threads, RawEventsPerSecond: bestRaw.wall,
		AuditEventsPerSecond: bestAudit.wall, Ratio: bestAudit.wall / bestRaw.wall, Violations: report.ViolationCount, Anomalies: report.AnomalyCount}
	if !report.OK() || report.AnomalyCount != 0 || report.Events != f.events {
		return errors.New("the generated log did not audit clean")
	}
	return nil
}

// readRate is how fast one read went: events per second of wall time, and
// per second of this process's CPU time (server included: it is embedded),
// which other load on the machine disturbs less.
type readRate struct {
	wall, cpu float64
}

// timeRead runs read and returns its rate, checking it read n events.
func timeRead(ctx context.Context, n int, read func() (int, error)) (readRate, error) {
	runtime.GC() // each read starts from the same heap
	c0 := cpuTime()
	start := time.Now()
	got, err := read()
	el := time.Since(start)
	c := cpuTime() - c0
	if err != nil {
		return readRate{}, err
	}
	if got != n {
		return readRate{}, fmt.Errorf("read %d events, want %d", got, n)
	}
	return readRate{wall: float64(n) / el.Seconds(), cpu: float64(n) / c.Seconds()}, ctx.Err()
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readRaw reads every message, touching its headers and payload.
func readRaw(ctx context.Context, store *natsstore.Store) (int, error) {
	n, bytes := 0, 0
	_, err := store.ReplayRaw(ctx, events.Subjects{}.All(), 1, func(m natsstore.RawMsg) error {
		n++
		bytes += len(m.Data) + len(m.Header)
		return nil
	})
	if bytes == 0 && n > 0 {
		return n, errors.New("read no bytes")
	}
	return n, err
}

// auditAll audits the whole stream.
func auditAll(ctx context.Context, store *natsstore.Store) (audit.Report, int, error) {
	au := audit.New()
	n := 0
	_, err := store.Replay(ctx, events.Subjects{}.All(), 1, func(env events.Envelope) error {
		n++
		au.Add(env)
		return nil
	})
	return au.Report(), n, err
}

// Bounds on the generator's asynchronous publishes. nats.go stalls a
// publish while asyncMaxPending acks are outstanding and fails it with
// ErrTooManyStalledMsgs after 200ms, which a loaded machine reached. So the
// generator keeps at most asyncWindow publishes in flight, fewer than the
// client allows, and waits for the oldest ack before it sends another:
// a publish never stalls.
const (
	asyncMaxPending = 4096
	asyncWindow     = 1024
)

// generateLog publishes n generated events asynchronously on a connection
// of its own and returns their average payload size. The events carry the
// expected-sequence headers of real appends, so the server checks each;
// one publisher's messages are stored in order, which is what the
// generator's predicted sequences rely on. A refused check fails the run.
func generateLog(ctx context.Context, url string, f *benchAuditFlags) (float64, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(asyncMaxPending))
	if err != nil {
		return 0, err
	}
	g := eventgen.NewRealistic(f.seed, f.threads)
	total := 0
	err = publishWindowed(ctx, js, f.events, asyncWindow, func() *nats.Msg {
		out := g.Next()
		total += len(out.Data)
		return &nats.Msg{Subject: out.Subject, Header: nats.Header(out.Header), Data: out.Data}
	})
	if err != nil {
		return 0, err
	}
	return float64(total) / float64(f.events), nil
}

// publishWindowed publishes n messages from next asynchronously, in order,
// with at most window awaiting their acks: before each publish past the
// window it waits for the ack of the one window places earlier. The first
// refused publish ends it with that error; opts apply to every publish.
func publishWindowed(ctx context.Context, js jetstream.JetStream, n, window int, next func() *nats.Msg, opts ...jetstream.PublishOpt) error {
	if window < 1 {
		return fmt.Errorf("bench: publish window %d is under 1", window)
	}
	ring := make([]jetstream.PubAckFuture, window)
	await := func(f jetstream.PubAckFuture) error {
		if f == nil {
			return nil
		}
		select {
		case <-f.Ok():
			return nil
		case err := <-f.Err():
			return fmt.Errorf("%s: %w", f.Msg().Subject, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i := range n {
		if err := await(ring[i%window]); err != nil {
			return err
		}
		f, err := js.PublishMsgAsync(next(), opts...)
		if err != nil {
			return err
		}
		ring[i%window] = f
	}
	for i := range ring {
		if err := await(ring[(n+i)%window]); err != nil {
			return err
		}
	}
	return nil
}
