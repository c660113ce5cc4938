package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/sys"
)

// ScaleConfig configures [Scale]: `artifactr bench scale`'s options.
type ScaleConfig struct {
	Threads  int           // threads to post to, once each
	Posters  int           // concurrent posters
	Sync     bool          // fsync every JetStream write
	Idle     time.Duration // how long to measure the idle claimed threads
	ClaimTTL time.Duration // the runner's session TTL. Required.
	// Partitions is the store's partition count, Runners how many runners
	// share the threads (with Partitions > 1 they divide the partitions).
	// Default 1 each.
	Partitions, Runners int
	// CPUProfile, when set, gets a CPU profile of the posting and claiming.
	CPUProfile string
	// MemProfile, when set, gets a heap profile after the idle phase.
	MemProfile string
	// Progress gets progress lines. Default discards.
	Progress io.Writer
	// Logger logs the errors of the server, the stores and the runner.
	// Default discards.
	Logger *slog.Logger
}

// ScaleResult is the figures of bench scale, as its --json prints them.
type ScaleResult struct {
	Threads             int     `json:"threads"`
	Claimed             int64   `json:"claimed"`
	ClaimsPerSecond     float64 `json:"claims_per_second"`
	BytesPerThread      float64 `json:"bytes_per_thread"`
	Consumers           int     `json:"consumers"`
	IdleCPUPercent      float64 `json:"idle_cpu_percent"`
	ServerMsgsPerSecond float64 `json:"server_msgs_per_second"`
	RunsCompleted       int64   `json:"runs_completed"`
	PostSeconds         float64 `json:"post_seconds"`
	AllRunsEndedSeconds float64 `json:"all_runs_ended_seconds"`
	// LoadCPUMicrosPerThread is the process CPU from the first post until
	// every run ended, per thread: steadier than the claim rate on a
	// machine whose speed drifts, so builds compare better by it.
	LoadCPUMicrosPerThread float64 `json:"load_cpu_us_per_thread"`
	RSSBeforeBytes         int64   `json:"rss_before_bytes"`
	RSSAfterBytes          int64   `json:"rss_after_bytes"`
	IdleSeconds            float64 `json:"idle_seconds"`
	Fsync                  bool    `json:"fsync"`
	Partitions             int     `json:"partitions"`
	Runners                int     `json:"runners"`
	// Delivery is what the server delivered to the runners per event
	// stored, from the first post until they followed the whole log.
	Delivery *Delivery `json:"delivery"`
	// AllClaimedSeconds is when every thread was claimed, after the first
	// post: the text shows it; --json has the rate instead.
	AllClaimedSeconds float64 `json:"-"`
}

// Scale posts once to each of cfg.Threads threads on an embedded server
// with cfg.Runners runners (default one) that give up no claim, waits until every run ended and
// the runner followed the whole log, then idles for cfg.Idle while
// measuring what the claimed idle threads cost.
func Scale(ctx context.Context, cfg ScaleConfig) (*ScaleResult, error) {
	if cfg.Threads < 1 || cfg.Posters < 1 {
		return nil, errors.New("bench: Threads and Posters must be at least 1")
	}
	if cfg.ClaimTTL <= 0 || cfg.Idle < 0 {
		return nil, errors.New("bench: ClaimTTL must be positive, Idle not negative")
	}
	if cfg.Partitions < 0 || cfg.Runners < 0 {
		return nil, errors.New("bench: Partitions and Runners must not be negative")
	}
	cfg.Partitions, cfg.Runners = max(cfg.Partitions, 1), max(cfg.Runners, 1)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	quiet := cfg.Logger
	ts, err := StartTempPartitions(ctx, "artifactr-scale-", !cfg.Sync, cfg.Partitions, quiet, nil)
	if err != nil {
		return nil, err
	}
	defer ts.Close()
	progress := func(format string, args ...any) {
		fmt.Fprintf(cfg.Progress, format+"\n", args...)
	}
	var rs []*runner.Runner
	defer func() {
		for _, r := range rs {
			r.Kill()
		}
	}()
	for i := range cfg.Runners {
		id := "scale"
		if cfg.Runners > 1 {
			id = fmt.Sprintf("scale-%d", i)
		}
		r, err := runner.New(runner.Config{
			Store: ts.Store, Agent: agent.Echo{}, ID: id, ClaimTTL: cfg.ClaimTTL,
			IdleTimeout: 24 * time.Hour, Logger: quiet, MaxClaiming: 512,
		})
		if err != nil {
			return nil, err
		}
		if err := r.Start(ctx); err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	if err := waitOwned(ctx, cfg.Partitions, rs); err != nil {
		return nil, err
	}
	stats := func() (st runner.Stats) {
		for _, r := range rs {
			s := r.Stats()
			st.Claims, st.Held, st.Completed, st.Failed = st.Claims+s.Claims, st.Held+s.Held, st.Completed+s.Completed, st.Failed+s.Failed
		}
		return st
	}
	before, err := readDelivery(ctx, ts)
	if err != nil {
		return nil, err
	}
	posters, err := ts.Client(ctx, quiet)
	if err != nil {
		return nil, err
	}
	defer posters.Close()
	rssBefore := rss()
	res := &ScaleResult{Threads: cfg.Threads, Fsync: cfg.Sync, RSSBeforeBytes: rssBefore, Partitions: cfg.Partitions, Runners: cfg.Runners}
	progress("bench scale: %d threads, embedded server (fsync %v), %d partitions, %d runners, echo agent; RSS before %s",
		cfg.Threads, cfg.Sync, cfg.Partitions, cfg.Runners, MiB(rssBefore))

	if cfg.CPUProfile != "" {
		stop, err := cpuProfile(cfg.CPUProfile)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	start, loadCPU := time.Now(), cpuTime()
	var next atomic.Int64
	err = parallel(ctx, cfg.Posters, func(ctx context.Context, _ int) error {
		for {
			i := int(next.Add(1)) - 1
			if i >= cfg.Threads {
				return nil
			}
			th := fmt.Sprintf("scale-%d", i)
			if _, err := posters.Post(ctx, th, &eventspb.MessagePosted{MessageId: "m0", Author: "bench", Text: "hello " + th}); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("post: %w", err)
	}
	res.PostSeconds = time.Since(start).Seconds()
	progress("posted %d in %.1fs", cfg.Threads, res.PostSeconds)
	claimedAt, err := waitStat(ctx, 200*time.Millisecond, func() (bool, string) {
		st := stats()
		return st.Claims >= int64(cfg.Threads), fmt.Sprintf("claimed %d/%d, runs ended %d", st.Claims, cfg.Threads, st.Completed+st.Failed)
	}, progress)
	if err != nil {
		return nil, err
	}
	res.AllClaimedSeconds = claimedAt.Sub(start).Seconds()
	res.ClaimsPerSecond = float64(cfg.Threads) / claimedAt.Sub(start).Seconds()
	endedAt, err := waitStat(ctx, 200*time.Millisecond, func() (bool, string) {
		st := stats()
		return st.Completed+st.Failed >= int64(cfg.Threads), fmt.Sprintf("runs ended %d/%d", st.Completed+st.Failed, cfg.Threads)
	}, progress)
	if err != nil {
		return nil, err
	}
	res.AllRunsEndedSeconds = endedAt.Sub(start).Seconds()
	res.LoadCPUMicrosPerThread = float64((cpuTime() - loadCPU).Microseconds()) / float64(cfg.Threads)
	// Idle means the runners have followed the whole log: wait until the
	// streams stop growing and every runner's follow (one per partition
	// with partitions, one a runner without) has caught up with them.
	follows := cfg.Partitions
	if cfg.Partitions == 1 {
		follows = cfg.Runners
	}
	var settled uint64
	var after deliveryCounts
	if _, err := waitStat(ctx, 500*time.Millisecond, func() (bool, string) {
		c, err := readDelivery(ctx, ts)
		if err != nil {
			return false, err.Error()
		}
		done := c.stored == settled && c.caughtUp >= follows
		settled, after = c.stored, c
		return done, fmt.Sprintf("%d of %d follows at the end of %d events", c.caughtUp, follows, c.stored)
	}, progress); err != nil {
		return nil, err
	}
	res.Delivery = after.since(before, nil)

	progress("all %d runs ended after %.1fs; idling %s", cfg.Threads, res.AllRunsEndedSeconds, cfg.Idle)
	// Settle the load phase's garbage first: a collection of the whole heap
	// that it left due, or the return of the freed memory to the OS, would
	// otherwise land in the idle window and count as the cost of holding
	// idle threads.
	debug.FreeOSMemory()
	ns := ts.Srv.NATS()
	v0, err := ns.Varz(&server.VarzOptions{})
	if err != nil {
		return nil, err
	}
	cpu0, t0 := cpuTime(), time.Now()
	if !sys.Sleep(ctx, cfg.Idle) {
		return nil, ctx.Err()
	}
	cpu1, t1 := cpuTime(), time.Now()
	v1, err := ns.Varz(&server.VarzOptions{})
	if err != nil {
		return nil, err
	}
	idle := t1.Sub(t0).Seconds()
	res.IdleSeconds = idle
	res.IdleCPUPercent = 100 * (cpu1 - cpu0).Seconds() / idle
	res.ServerMsgsPerSecond = float64((v1.InMsgs+v1.OutMsgs)-(v0.InMsgs+v0.OutMsgs)) / idle
	js, err := jetstream.New(ts.Store.Conn())
	if err != nil {
		return nil, err
	}
	ai, err := js.AccountInfo(ctx)
	if err != nil {
		return nil, err
	}
	res.Consumers = ai.Consumers
	st := stats()
	res.Claimed, res.RunsCompleted = st.Held, st.Completed
	res.RSSAfterBytes = rss()
	if cfg.MemProfile != "" {
		if pf, err := os.Create(cfg.MemProfile); err == nil {
			_ = pprof.WriteHeapProfile(pf)
			pf.Close()
		}
	}
	res.BytesPerThread = float64(res.RSSAfterBytes-rssBefore) / float64(cfg.Threads)
	return res, nil
}

// waitStat polls cond every d until it holds, printing its state now and
// then, and returns when it held.
func waitStat(ctx context.Context, d time.Duration, cond func() (bool, string), progress func(string, ...any)) (time.Time, error) {
	last := time.Now()
	for {
		ok, state := cond()
		if ok {
			return time.Now(), nil
		}
		if time.Since(last) >= 5*time.Second {
			progress("  %s", state)
			last = time.Now()
		}
		if !sys.Sleep(ctx, d) {
			return time.Time{}, fmt.Errorf("%w (%s)", ctx.Err(), state)
		}
	}
}

// rss returns the process's resident set size after returning the Go heap's
// free memory to the OS, so it counts what is in use.
func rss() int64 {
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// MiB formats b bytes in mebibytes, as bench scale's lines show memory.
func MiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
