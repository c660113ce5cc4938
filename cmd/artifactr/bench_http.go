package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/httpapi"
	"github.com/artifactr/artifactr/internal/bench"
)

type benchHTTPFlags struct {
	threads, messages int
	noSync            bool
	maxTime           time.Duration
	clientURL         string // set in the client process
	prefix            string
	cpuProfile        string
	json              bool
	rounds            int
}

func (a *app) benchHTTPCommand() *cobra.Command {
	var f benchHTTPFlags
	cmd := &cobra.Command{
		Use:   "http",
		Short: "The closed loop of bench turns --closed-loop through the HTTP API's runs.wait, next to NATS-direct",
		Long: `Run the chat-shaped closed loop on one embedded server (fsync on unless
--no-sync), one runner, the echo agent, in turns: posting over NATS
directly (as bench turns --closed-loop does), then through the HTTP API
(POST /threads/T/runs/wait) from a client process of its own, --rounds
times, and over NATS once more. Each thread posts its next message once its
last run ended. Prints turns/s, latency percentiles and CPU per turn
(server and client processes) for each phase, and the ratio of the HTTP
phases' median turns/s to the NATS-direct phases' median.

--json prints the figures as one object at the end (the text lines go to
stderr).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), f.maxTime)
			defer cancel()
			if f.clientURL != "" {
				return a.benchHTTPClient(ctx, &f)
			}
			var jsonOut io.Writer
			if f.json {
				jsonOut = a.jsonMode()
			}
			res, err := a.benchHTTP(ctx, &f)
			if err != nil {
				return fail(fmt.Errorf("bench http: %w", err))
			}
			if f.json {
				return writeJSON(jsonOut, res)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.threads, "threads", 200, "threads posting at once")
	fl.IntVar(&f.messages, "messages", 50, "turns per thread")
	fl.BoolVar(&f.noSync, "no-sync", false, "do not fsync")
	fl.DurationVar(&f.maxTime, "max-time", 10*time.Minute, "give up after this long")
	fl.StringVar(&f.clientURL, "client-url", "", "run as the HTTP client process against this API")
	fl.StringVar(&f.prefix, "prefix", "h", "thread id prefix (client process)")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the server process during the HTTP phase to this file")
	fl.BoolVar(&f.json, "json", false, "print the figures as one JSON object")
	fl.IntVar(&f.rounds, "rounds", 3, "HTTP phases, each after a NATS-direct one (one more NATS-direct ends the run)")
	_ = fl.MarkHidden("client-url")
	_ = fl.MarkHidden("prefix")
	return cmd
}

// httpLoopResult is what the client process reports, as one JSON line.
type httpLoopResult struct {
	Turns   int           `json:"turns"`
	Elapsed time.Duration `json:"elapsed_ns"`
	P50     time.Duration `json:"p50_ns"`
	P99     time.Duration `json:"p99_ns"`
	CPU     time.Duration `json:"cpu_ns"`
}

func (a *app) benchHTTP(ctx context.Context, f *benchHTTPFlags) (*benchHTTPJSON, error) {
	if f.threads < 1 || f.messages < 1 || f.rounds < 1 {
		return nil, fmt.Errorf("--threads, --messages and --rounds must each be at least 1, not %d, %d and %d", f.threads, f.messages, f.rounds)
	}
	ts, err := a.startTempServer(ctx, "artifactr-bench-http-", f.noSync, nil)
	if err != nil {
		return nil, err
	}
	defer ts.Close()
	quiet := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	r, err := runner.New(runner.Config{Store: ts.Store, Agent: agent.Echo{}, ID: "bench", IdleTimeout: time.Hour, Logger: quiet})
	if err != nil {
		return nil, err
	}
	if err := r.Start(ctx); err != nil {
		return nil, err
	}
	defer r.Kill()
	c, err := client.Dial(ctx, client.Config{URL: ts.Srv.ClientURL(), Logger: quiet})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	api, err := httpapi.New(httpapi.Config{Client: c, Assistants: []httpapi.Assistant{{GraphID: "echo", Kind: "echo"}}, Logger: quiet})
	if err != nil {
		return nil, err
	}
	l, err := httpapi.Listen(api, "127.0.0.1:0", "", "")
	if err != nil {
		return nil, err
	}
	defer l.Close(context.WithoutCancel(ctx))
	note := "fsync on every write"
	if f.noSync {
		note = "not fsynced"
	}
	fmt.Fprintf(a.stdout, "bench http: embedded server (%s), one runner, echo agent, %d threads x %d turns, each thread posting its next message when its last run ended\n", note, f.threads, f.messages)
	out := &benchHTTPJSON{Fsync: !f.noSync}

	clients, err := ts.Client(ctx, quiet)
	if err != nil {
		return nil, err
	}
	defer clients.Close()
	// Rounds of NATS-direct then HTTP, and NATS-direct once more, so that
	// neither side has the warm runner or a quiet spell to itself; the ratio
	// is of the medians.
	var nd, web []benchPhaseJSON
	var serverCPU, clientCPU []float64
	for i := 0; i <= f.rounds; i++ {
		p, err := a.closedPhase(ctx, clients, fmt.Sprintf("nats-direct #%d", i+1), fmt.Sprintf("nd%d", i), f.threads, f.messages)
		if err != nil {
			return nil, err
		}
		nd = append(nd, p)
		out.Phases = append(out.Phases, p)
		if i == f.rounds {
			break
		}
		h, scpu, ccpu, err := a.httpPhase(ctx, f, l.URL, i)
		if err != nil {
			return nil, err
		}
		web = append(web, h)
		serverCPU, clientCPU = append(serverCPU, scpu), append(clientCPU, ccpu)
		out.Phases = append(out.Phases, h)
	}
	rate := func(ps []benchPhaseJSON) []float64 {
		var v []float64
		for _, p := range ps {
			v = append(v, p.TurnsPerSecond)
		}
		return v
	}
	cpu := func(ps []benchPhaseJSON) []float64 {
		var v []float64
		for _, p := range ps {
			v = append(v, p.CPUMsPerTurn)
		}
		return v
	}
	out.HTTPServerCPUMsPerTurn, out.HTTPClientCPUMsPerTurn = median(serverCPU), median(clientCPU)
	out.HTTPTurnsPerSecond, out.NATSDirectTurnsPerSecond = median(rate(web)), median(rate(nd))
	out.Ratio = out.HTTPTurnsPerSecond / out.NATSDirectTurnsPerSecond
	fmt.Fprintf(a.stdout, "http / nats-direct: %.2f x turns/s (medians of %d and %d phases: %.0f and %.0f turns/s; CPU %.2f and %.2f ms per turn)\n",
		out.Ratio, len(web), len(nd), out.HTTPTurnsPerSecond, out.NATSDirectTurnsPerSecond, median(cpu(web)), median(cpu(nd)))
	return out, nil
}

// httpPhase runs the closed loop over HTTP from a client process of its
// own, and returns it as a phase with the server's and the client's CPU
// per turn.
func (a *app) httpPhase(ctx context.Context, f *benchHTTPFlags, url string, round int) (benchPhaseJSON, float64, float64, error) {
	exe, err := os.Executable()
	if err != nil {
		return benchPhaseJSON{}, 0, 0, err
	}
	if f.cpuProfile != "" && round == 0 {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return benchPhaseJSON{}, 0, 0, err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return benchPhaseJSON{}, 0, 0, err
		}
		defer pprof.StopCPUProfile()
	}
	cpu1 := bench.CPUTime()
	cmd := exec.CommandContext(ctx, exe, "bench", "http", "--client-url", url, "--prefix", fmt.Sprintf("h%d", round),
		"--threads", fmt.Sprint(f.threads), "--messages", fmt.Sprint(f.messages), "--max-time", f.maxTime.String())
	cmd.Stderr = a.stderr
	cmd.Env = append(os.Environ(), benchClientEnv+"=1")
	got, err := cmd.Output()
	if err != nil {
		return benchPhaseJSON{}, 0, 0, fmt.Errorf("the HTTP client process: %w", err)
	}
	serverCPU := bench.CPUTime() - cpu1
	var res httpLoopResult
	if err := json.Unmarshal(bytes.TrimSpace(got), &res); err != nil {
		return benchPhaseJSON{}, 0, 0, fmt.Errorf("the HTTP client process said %q: %w", got, err)
	}
	if res.Turns < 1 || res.Elapsed <= 0 {
		return benchPhaseJSON{}, 0, 0, fmt.Errorf("the HTTP client process reported no turns: %q", got)
	}
	turns := float64(res.Turns)
	rate := turns / res.Elapsed.Seconds()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	scpu, ccpu := ms(serverCPU)/turns, ms(res.CPU)/turns
	fmt.Fprintf(a.stdout, "http #%d (runs.wait, client process of its own): %d threads x %d turns: %.0f turns/s (%s wall), CPU %.2f ms per turn (server %.2f + client %.2f)\n",
		round+1, f.threads, f.messages, rate, res.Elapsed.Round(time.Millisecond), scpu+ccpu, scpu, ccpu)
	fmt.Fprintf(a.stdout, "  latency: request -> response p50 %s p99 %s\n", res.P50.Round(10*time.Microsecond), res.P99.Round(10*time.Microsecond))
	return benchPhaseJSON{
		Name: fmt.Sprintf("http #%d", round+1), Threads: f.threads, Turns: res.Turns, TurnsPerSecond: rate,
		CPUMsPerTurn: scpu + ccpu, EndP50Ms: ms(res.P50), EndP99Ms: ms(res.P99),
	}, scpu, ccpu, nil
}

// median is the middle of v (the mean of the two middle values when
// there are as many on each side), or 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// benchClientEnv marks the process bench http starts as its HTTP client, so
// that a test binary standing in for artifactr runs the command.
const benchClientEnv = "ARTIFACTR_BENCH_HTTP_CLIENT"

// benchHTTPClient is the client process: the closed loop over HTTP.
func (a *app) benchHTTPClient(ctx context.Context, f *benchHTTPFlags) error {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: f.threads, MaxIdleConnsPerHost: f.threads, IdleConnTimeout: time.Minute}}
	var mu sync.Mutex
	var lat []time.Duration
	cpu0, start := bench.CPUTime(), time.Now()
	err := parallel(ctx, f.threads, func(ctx context.Context, i int) error {
		thread := fmt.Sprintf("%s-%d-%d", f.prefix, os.Getpid(), i)
		for j := range f.messages {
			body := fmt.Sprintf(`{"assistant_id":"echo","if_not_exists":"create","multitask_strategy":"enqueue","input":{"messages":[{"role":"user","content":"message %d of %s","id":"m%d"}]}}`, j, thread, j)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.clientURL+"/threads/"+thread+"/runs/wait", strings.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			t := time.Now()
			res, err := hc.Do(req)
			if err != nil {
				return err
			}
			b, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil {
				return err
			}
			if res.StatusCode != 200 || !bytes.Contains(b, []byte(`"echo: message`)) {
				return fmt.Errorf("%s turn %d: %d %s", thread, j, res.StatusCode, b)
			}
			d := time.Since(t)
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	res := httpLoopResult{Turns: f.threads * f.messages, Elapsed: time.Since(start), P50: pct(lat, 0.5), P99: pct(lat, 0.99), CPU: bench.CPUTime() - cpu0}
	return json.NewEncoder(a.stdout).Encode(res)
}
