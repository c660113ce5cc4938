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
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/httpapi"
)

type benchHTTPFlags struct {
	threads, messages int
	noSync            bool
	maxTime           time.Duration
	clientURL         string // set in the client process
	prefix            string
	cpuProfile        string
	json              bool
}

func (a *app) benchHTTPCommand() *cobra.Command {
	var f benchHTTPFlags
	cmd := &cobra.Command{
		Use:   "http",
		Short: "The closed loop of bench turns --closed-loop through the HTTP API's runs.wait, next to NATS-direct",
		Long: `Run the chat-shaped closed loop twice on one embedded server (fsync on unless
--no-sync), one runner, the echo agent: first posting over NATS directly
(as bench turns --closed-loop does), then through the HTTP API
(POST /threads/T/runs/wait) from a client process of its own. Each thread
posts its next message once its last run ended. Prints turns/s, latency
percentiles and CPU per turn (server and client processes) for each, and
the ratio of HTTP's turns/s to the better NATS-direct run (one before, one
after the HTTP phase).

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
	if f.threads < 1 || f.messages < 1 {
		return nil, fmt.Errorf("--threads and --messages must each be at least 1, not %d and %d", f.threads, f.messages)
	}
	ts, err := a.startTempServer(ctx, "artifactr-bench-http-", f.noSync, nil)
	if err != nil {
		return nil, err
	}
	defer ts.Close()
	quiet := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	r, err := runner.New(runner.Config{Store: ts.store, Agent: agent.Echo{}, ID: "bench", IdleTimeout: time.Hour, Logger: quiet})
	if err != nil {
		return nil, err
	}
	if err := r.Start(ctx); err != nil {
		return nil, err
	}
	defer r.Kill()
	c, err := client.Dial(ctx, client.Config{URL: ts.srv.ClientURL(), Logger: quiet})
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

	clients, err := ts.client(ctx, quiet)
	if err != nil {
		return nil, err
	}
	defer clients.Close()
	first, err := a.closedPhase(ctx, clients, "nats-direct", "nd", f.threads, f.messages)
	if err != nil {
		return nil, err
	}
	out.Phases = append(out.Phases, first)

	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return nil, err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return nil, err
		}
	}
	cpu1 := cpuTime()
	cmd := exec.CommandContext(ctx, exe, "bench", "http", "--client-url", l.URL, "--prefix", "h",
		"--threads", fmt.Sprint(f.threads), "--messages", fmt.Sprint(f.messages), "--max-time", f.maxTime.String())
	cmd.Stderr = a.stderr
	cmd.Env = append(os.Environ(), benchClientEnv+"=1")
	got, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("the HTTP client process: %w", err)
	}
	serverCPU := cpuTime() - cpu1
	if f.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	var res httpLoopResult
	if err := json.Unmarshal(bytes.TrimSpace(got), &res); err != nil {
		return nil, fmt.Errorf("the HTTP client process said %q: %w", got, err)
	}
	if res.Turns < 1 || res.Elapsed <= 0 {
		return nil, fmt.Errorf("the HTTP client process reported no turns: %q", got)
	}
	turns := float64(res.Turns)
	rate := turns / res.Elapsed.Seconds()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	out.HTTPServerCPUMsPerTurn = ms(serverCPU) / turns
	out.HTTPClientCPUMsPerTurn = ms(res.CPU) / turns
	out.Phases = append(out.Phases, benchPhaseJSON{
		Name: "http", Threads: f.threads, Turns: res.Turns, TurnsPerSecond: rate,
		CPUMsPerTurn: out.HTTPServerCPUMsPerTurn + out.HTTPClientCPUMsPerTurn,
		EndP50Ms:     ms(res.P50), EndP99Ms: ms(res.P99),
	})
	fmt.Fprintf(a.stdout, "http (runs.wait, client process of its own): %d threads x %d turns: %.0f turns/s (%s wall), CPU %.2f ms per turn (server %.2f + client %.2f)\n",
		f.threads, f.messages, rate, res.Elapsed.Round(time.Millisecond),
		out.HTTPServerCPUMsPerTurn+out.HTTPClientCPUMsPerTurn, out.HTTPServerCPUMsPerTurn, out.HTTPClientCPUMsPerTurn)
	fmt.Fprintf(a.stdout, "  latency: request -> response p50 %s p99 %s\n", res.P50.Round(10*time.Microsecond), res.P99.Round(10*time.Microsecond))
	// NATS-direct again, after HTTP, so that neither phase has the warm
	// runner to itself: the ratio is against the better of the two.
	again, err := a.closedPhase(ctx, clients, "nats-direct (again)", "nd2", f.threads, f.messages)
	if err != nil {
		return nil, err
	}
	out.Phases = append(out.Phases, again)
	best := first
	if again.TurnsPerSecond > best.TurnsPerSecond {
		best = again
	}
	out.Ratio = rate / best.TurnsPerSecond
	fmt.Fprintf(a.stdout, "http / nats-direct: %.2f x turns/s (nats-direct, the better run: %.0f turns/s, CPU %.2f ms per turn)\n",
		out.Ratio, best.TurnsPerSecond, best.CPUMsPerTurn)
	return out, nil
}

// benchClientEnv marks the process bench http starts as its HTTP client, so
// that a test binary standing in for artifactr runs the command.
const benchClientEnv = "ARTIFACTR_BENCH_HTTP_CLIENT"

// benchHTTPClient is the client process: the closed loop over HTTP.
func (a *app) benchHTTPClient(ctx context.Context, f *benchHTTPFlags) error {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: f.threads, MaxIdleConnsPerHost: f.threads, IdleConnTimeout: time.Minute}}
	var mu sync.Mutex
	var lat []time.Duration
	cpu0, start := cpuTime(), time.Now()
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
	res := httpLoopResult{Turns: f.threads * f.messages, Elapsed: time.Since(start), P50: pct(lat, 0.5), P99: pct(lat, 0.99), CPU: cpuTime() - cpu0}
	return json.NewEncoder(a.stdout).Encode(res)
}
