package main

import (
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/bench"
	"github.com/artifactr/artifactr/internal/sys"
)

// scaleFlags are `bench scale` options.
type scaleFlags struct {
	threads  int
	sync     bool
	idle     time.Duration
	json     bool
	maxTime  time.Duration
	claimTTL time.Duration
	posters  int
	profile  string
	memprof  string
}

// scaleResult is what `bench scale --json` prints.
type scaleResult struct {
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
}

func (a *app) benchScaleCommand() *cobra.Command {
	var f scaleFlags
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "What claimed idle threads cost: memory, consumers, idle CPU and traffic",
		Long: `Start an embedded server in a temporary directory and one runner with the
echo agent and an idle timeout long enough that no claim is given up; post
once to each of --threads threads (--posters at a time, over a connection
of their own, as clients), wait until every run has ended and the
runner has followed the whole log, collect the garbage the load left, then
idle for --idle while measuring.

Reports the claim rate, the memory each claimed thread costs (process RSS
after minus before, divided by the threads; server and runner are one
process, and the Go heap is returned to the OS before each reading), the
JetStream consumers on the server while idle, the process CPU while idle as
a percentage of one core, and the server's own message counters (in + out)
per second while idle. Figures only: nothing is asserted.`,
		Example: `  artifactr bench scale --threads 10000
  artifactr bench scale --threads 100000 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.threads < 1 || f.posters < 1 {
				return usagef("--threads and --posters must be at least 1")
			}
			if f.maxTime <= 0 || f.claimTTL <= 0 || f.idle < 0 {
				return usagef("--max-time and --claim-ttl must be positive, --idle not negative")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.maxTime)
			defer cancel()
			if err := a.benchScale(ctx, &f); err != nil {
				return fail(fmt.Errorf("bench scale: %w", err))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.threads, "threads", 10000, "threads to post to, once each")
	fl.BoolVar(&f.sync, "sync", false, "fsync every JetStream write, as serve does by default")
	fl.DurationVar(&f.idle, "idle", 10*time.Second, "how long to measure the idle claimed threads")
	fl.BoolVar(&f.json, "json", false, "print one JSON object")
	fl.DurationVar(&f.maxTime, "max-time", 15*time.Minute, "give up after this long")
	fl.DurationVar(&f.claimTTL, "claim-ttl", 10*time.Second, "the runner's session TTL")
	fl.IntVar(&f.posters, "posters", 64, "concurrent posters")
	fl.StringVar(&f.profile, "cpuprofile", "", "write a CPU profile of the posting and claiming to this file")
	_ = fl.MarkHidden("cpuprofile")
	fl.StringVar(&f.memprof, "memprofile", "", "write a heap profile after the idle phase to this file")
	_ = fl.MarkHidden("memprofile")
	return cmd
}

func (a *app) benchScale(ctx context.Context, f *scaleFlags) error {
	ts, err := a.startTempServer(ctx, "artifactr-scale-", !f.sync, nil)
	if err != nil {
		return err
	}
	defer ts.Close()
	progress := func(format string, args ...any) {
		if !f.json {
			fmt.Fprintf(a.stderr, format+"\n", args...)
		}
	}
	quiet := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	r, err := runner.New(runner.Config{
		Store: ts.Store, Agent: agent.Echo{}, ID: "scale", ClaimTTL: f.claimTTL,
		IdleTimeout: 24 * time.Hour, Logger: quiet, MaxClaiming: 512,
	})
	if err != nil {
		return err
	}
	if err := r.Start(ctx); err != nil {
		return err
	}
	defer r.Kill()
	posters, err := ts.Client(ctx, quiet)
	if err != nil {
		return err
	}
	defer posters.Close()
	rssBefore := rss()
	res := scaleResult{Threads: f.threads, Fsync: f.sync, RSSBeforeBytes: rssBefore}
	progress("bench scale: %d threads, embedded server (fsync %v), one runner, echo agent; RSS before %s", f.threads, f.sync, mib(rssBefore))

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
	start, loadCPU := time.Now(), bench.CPUTime()
	var next atomic.Int64
	err = parallel(ctx, f.posters, func(ctx context.Context, _ int) error {
		for {
			i := int(next.Add(1)) - 1
			if i >= f.threads {
				return nil
			}
			th := fmt.Sprintf("scale-%d", i)
			if _, err := posters.Post(ctx, th, &eventspb.MessagePosted{MessageId: "m0", Author: "bench", Text: "hello " + th}); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return fmt.Errorf("post: %w", err)
	}
	res.PostSeconds = time.Since(start).Seconds()
	progress("posted %d in %.1fs", f.threads, res.PostSeconds)
	claimedAt, err := waitStat(ctx, 200*time.Millisecond, func() (bool, string) {
		st := r.Stats()
		return st.Claims >= int64(f.threads), fmt.Sprintf("claimed %d/%d, runs ended %d", st.Claims, f.threads, st.Completed+st.Failed)
	}, progress)
	if err != nil {
		return err
	}
	res.ClaimsPerSecond = float64(f.threads) / claimedAt.Sub(start).Seconds()
	endedAt, err := waitStat(ctx, 200*time.Millisecond, func() (bool, string) {
		st := r.Stats()
		return st.Completed+st.Failed >= int64(f.threads), fmt.Sprintf("runs ended %d/%d", st.Completed+st.Failed, f.threads)
	}, progress)
	if err != nil {
		return err
	}
	res.AllRunsEndedSeconds = endedAt.Sub(start).Seconds()
	res.LoadCPUMicrosPerThread = float64((bench.CPUTime() - loadCPU).Microseconds()) / float64(f.threads)
	// Idle means the runner has followed the whole log: wait until the
	// stream stops growing and the follow has caught up with it.
	var settledLast uint64
	if _, err := waitStat(ctx, 500*time.Millisecond, func() (bool, string) {
		last, err := ts.Store.LastStreamSeq(ctx)
		if err != nil {
			return false, err.Error()
		}
		done := last == settledLast && r.Followed() >= last
		settledLast = last
		return done, fmt.Sprintf("follow at %d of %d", r.Followed(), last)
	}, progress); err != nil {
		return err
	}

	progress("all %d runs ended after %.1fs; idling %s", f.threads, res.AllRunsEndedSeconds, f.idle)
	// Settle the load phase's garbage first: a collection of the whole heap
	// that it left due, or the return of the freed memory to the OS, would
	// otherwise land in the idle window and count as the cost of holding
	// idle threads.
	debug.FreeOSMemory()
	ns := ts.Srv.NATS()
	v0, err := ns.Varz(&server.VarzOptions{})
	if err != nil {
		return err
	}
	cpu0, t0 := bench.CPUTime(), time.Now()
	if !sys.Sleep(ctx, f.idle) {
		return ctx.Err()
	}
	cpu1, t1 := bench.CPUTime(), time.Now()
	v1, err := ns.Varz(&server.VarzOptions{})
	if err != nil {
		return err
	}
	idle := t1.Sub(t0).Seconds()
	res.IdleSeconds = idle
	res.IdleCPUPercent = 100 * (cpu1 - cpu0).Seconds() / idle
	res.ServerMsgsPerSecond = float64((v1.InMsgs+v1.OutMsgs)-(v0.InMsgs+v0.OutMsgs)) / idle
	js, err := jetstream.New(ts.Store.Conn())
	if err != nil {
		return err
	}
	ai, err := js.AccountInfo(ctx)
	if err != nil {
		return err
	}
	res.Consumers = ai.Consumers
	st := r.Stats()
	res.Claimed, res.RunsCompleted = st.Held, st.Completed
	res.RSSAfterBytes = rss()
	if f.memprof != "" {
		if pf, err := os.Create(f.memprof); err == nil {
			_ = pprof.WriteHeapProfile(pf)
			pf.Close()
		}
	}
	res.BytesPerThread = float64(res.RSSAfterBytes-rssBefore) / float64(f.threads)

	if f.json {
		b, _ := json.Marshal(res)
		fmt.Fprintln(a.stdout, string(b))
		return nil
	}
	fmt.Fprintf(a.stdout, "threads:   %d posted, %d claimed and held, %d runs completed\n", res.Threads, res.Claimed, res.RunsCompleted)
	fmt.Fprintf(a.stdout, "claims:    %.0f/s (all claimed %.1fs after the first post; all runs ended after %.1fs)\n", res.ClaimsPerSecond, claimedAt.Sub(start).Seconds(), res.AllRunsEndedSeconds)
	fmt.Fprintf(a.stdout, "load CPU:  %.0f µs per thread (post, claim and run, runner and server)\n", res.LoadCPUMicrosPerThread)
	fmt.Fprintf(a.stdout, "memory:    %.0f bytes per claimed thread (RSS %s -> %s, runner and server in one process)\n", res.BytesPerThread, mib(rssBefore), mib(res.RSSAfterBytes))
	fmt.Fprintf(a.stdout, "consumers: %d on the server while idle\n", res.Consumers)
	fmt.Fprintf(a.stdout, "idle:      %.1f%% of one core, %.0f server msgs/s (in+out) over %.0fs\n", res.IdleCPUPercent, res.ServerMsgsPerSecond, idle)
	return nil
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

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
