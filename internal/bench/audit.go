package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/eventgen"
	"github.com/artifactr/artifactr/projections/audit"
)

// AuditConfig configures [Audit]: `artifactr bench audit`'s options.
type AuditConfig struct {
	Events  int    // events to generate
	Threads int    // threads they are spread over
	Rounds  int    // reads each way, alternating which goes first
	Seed    uint64 // seed of the generated log
	Profile string // when set, a CPU profile of the reads goes to this file
	// Out gets the text lines. Required.
	Out io.Writer
	// NATSLogger logs for the embedded server. Default discards.
	NATSLogger *slog.Logger
}

// AuditResult is the audit benchmark's figures, as bench audit --json
// prints them.
type AuditResult struct {
	Events               int     `json:"events"`
	Threads              int     `json:"threads"`
	RawEventsPerSecond   float64 `json:"raw_events_per_second"`
	AuditEventsPerSecond float64 `json:"audit_events_per_second"`
	Ratio                float64 `json:"ratio"`
	Violations           int     `json:"violations"`
	Anomalies            int     `json:"anomalies"`
}

// Audit runs the audit benchmark, printing its lines to cfg.Out, and
// returns its figures. It returns an error, with the figures, when the
// generated log did not audit clean.
func Audit(ctx context.Context, cfg AuditConfig) (AuditResult, error) {
	var res AuditResult
	if cfg.Events < 1 || cfg.Threads < 1 || cfg.Rounds < 1 {
		return res, errors.New("bench: Events, Threads and Rounds must be at least 1")
	}
	f := &cfg
	ts, err := StartTemp(ctx, "artifactr-bench-audit-", true, cfg.NATSLogger, nil)
	if err != nil {
		return res, err
	}
	defer ts.Close()
	srv, store := ts.Srv, ts.Store
	fmt.Fprintf(cfg.Out, "bench audit: %d events across %d threads, embedded server (not fsynced), %d CPUs, GOMAXPROCS %d\n",
		f.Events, f.Threads, runtime.NumCPU(), runtime.GOMAXPROCS(0))

	start := time.Now()
	size, err := generateLog(ctx, srv.ClientURL(), f)
	if err != nil {
		return res, fmt.Errorf("generate: %w", err)
	}
	gen := time.Since(start)
	fmt.Fprintf(cfg.Out, "generate: %d events in %s (%.0f events/s), %.0f bytes of payload per event on average\n",
		f.Events, gen.Round(time.Millisecond), float64(f.Events)/gen.Seconds(), size)
	if last, err := store.LastStreamSeq(ctx); err != nil || last != uint64(f.Events) {
		return res, fmt.Errorf("stream holds %d events, want %d (err %v)", last, f.Events, err)
	}
	if f.Profile != "" {
		stop, err := cpuProfile(f.Profile)
		if err != nil {
			return res, err
		}
		defer stop()
	}

	var bestRaw, bestAudit readRate
	var report audit.Report
	var ratios []float64
	for round := 1; round <= f.Rounds; round++ {
		readRawOnce := func() (readRate, error) {
			return timeRead(ctx, f.Events, func() (int, error) { return readRaw(ctx, store) })
		}
		auditOnce := func() (readRate, error) {
			return timeRead(ctx, f.Events, func() (int, error) {
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
			return res, err
		}
		ratios = append(ratios, aud.wall/raw.wall)
		fmt.Fprintf(cfg.Out, "round %d: raw read %.0f events/s (%.0f per CPU-second), audit %.0f events/s (%.0f per CPU-second): ratio %.2f\n",
			round, raw.wall, raw.cpu, aud.wall, aud.cpu, aud.wall/raw.wall)
		bestRaw.wall, bestRaw.cpu = max(bestRaw.wall, raw.wall), max(bestRaw.cpu, raw.cpu)
		bestAudit.wall, bestAudit.cpu = max(bestAudit.wall, aud.wall), max(bestAudit.cpu, aud.cpu)
	}
	slices.Sort(ratios)
	fmt.Fprintf(cfg.Out, "raw:     %.0f events/s reading the whole stream (natsstore ReplayRaw: ordered consumer, no decode), best of %d; %.0f per CPU-second\n",
		bestRaw.wall, f.Rounds, bestRaw.cpu)
	fmt.Fprintf(cfg.Out, "audit:   %.0f events/s reading, decoding and auditing it (natsstore Replay + projections/audit), best of %d; %.0f per CPU-second\n",
		bestAudit.wall, f.Rounds, bestAudit.cpu)
	fmt.Fprintf(cfg.Out, "ratio:   audit / raw = %.2f best of each (median of the rounds' ratios %.2f; per CPU-second %.2f)\n",
		bestAudit.wall/bestRaw.wall, ratios[len(ratios)/2], bestAudit.cpu/bestRaw.cpu)
	fmt.Fprintf(cfg.Out, "verdict: %d events, %d threads, %d violations, %d anomalies\n", report.Events, report.Threads, report.ViolationCount, report.AnomalyCount)
	res = AuditResult{Events: report.Events, Threads: report.Threads, RawEventsPerSecond: bestRaw.wall,
		AuditEventsPerSecond: bestAudit.wall, Ratio: bestAudit.wall / bestRaw.wall, Violations: report.ViolationCount, Anomalies: report.AnomalyCount}
	if !report.OK() || report.AnomalyCount != 0 || report.Events != f.Events {
		return res, errors.New("the generated log did not audit clean")
	}
	return res, nil
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
func generateLog(ctx context.Context, url string, f *AuditConfig) (float64, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(asyncMaxPending))
	if err != nil {
		return 0, err
	}
	g := eventgen.NewRealistic(f.Seed, f.Threads)
	total := 0
	err = publishWindowed(ctx, js, f.Events, asyncWindow, func() *nats.Msg {
		out := g.Next()
		total += len(out.Data)
		return &nats.Msg{Subject: out.Subject, Header: nats.Header(out.Header), Data: out.Data}
	})
	if err != nil {
		return 0, err
	}
	return float64(total) / float64(f.Events), nil
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
