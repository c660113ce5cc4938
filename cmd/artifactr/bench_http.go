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
percentiles and CPU per turn (server and client processes) for each.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), f.maxTime)
			defer cancel()
			if f.clientURL != "" {
				return a.benchHTTPClient(ctx, &f)
			}
			if err := a.benchHTTP(ctx, &f); err != nil {
				return fail(fmt.Errorf("bench http: %w", err))
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

func (a *app) benchHTTP(ctx context.Context, f *benchHTTPFlags) error {
	ts, err := a.startTempServer(ctx, "artifactr-bench-http-", f.noSync, nil)
	if err != nil {
		return err
	}
	defer ts.Close()
	quiet := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	r, err := runner.New(runner.Config{Store: ts.store, Agent: agent.Echo{}, ID: "bench", IdleTimeout: time.Hour, Logger: quiet})
	if err != nil {
		return err
	}
	if err := r.Start(ctx); err != nil {
		return err
	}
	defer r.Kill()
	c, err := client.Dial(ctx, client.Config{URL: ts.srv.ClientURL(), Logger: quiet})
	if err != nil {
		return err
	}
	defer c.Close()
	api, err := httpapi.New(httpapi.Config{Client: c, Assistants: []httpapi.Assistant{{GraphID: "echo", Kind: "echo"}}, Logger: quiet})
	if err != nil {
		return err
	}
	l, err := httpapi.Listen(api, "127.0.0.1:0", "", "")
	if err != nil {
		return err
	}
	defer l.Close(context.WithoutCancel(ctx))
	note := "fsync on every write"
	if f.noSync {
		note = "not fsynced"
	}
	fmt.Fprintf(a.stdout, "bench http: embedded server (%s), one runner, echo agent, %d threads x %d turns, each thread posting its next message when its last run ended\n", note, f.threads, f.messages)

	clients, err := ts.client(ctx, quiet)
	if err != nil {
		return err
	}
	defer clients.Close()
	cpu0, t0 := cpuTime(), time.Now()
	if err := a.closedPhase(ctx, clients, "nats-direct", "nd", f.threads, f.messages); err != nil {
		return err
	}
	natsRate := float64(f.threads*f.messages) / time.Since(t0).Seconds()
	natsCPU := cpuTime() - cpu0

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cpu1 := cpuTime()
	cmd := exec.CommandContext(ctx, exe, "bench", "http", "--client-url", l.URL, "--prefix", "h",
		"--threads", fmt.Sprint(f.threads), "--messages", fmt.Sprint(f.messages), "--max-time", f.maxTime.String())
	cmd.Stderr = a.stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("the HTTP client process: %w", err)
	}
	serverCPU := cpuTime() - cpu1
	var res httpLoopResult
	if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil {
		return fmt.Errorf("the HTTP client process said %q: %w", out, err)
	}
	turns := float64(res.Turns)
	rate := turns / res.Elapsed.Seconds()
	fmt.Fprintf(a.stdout, "http (runs.wait, client process of its own): %d threads x %d turns: %.0f turns/s (%s wall), CPU %.2f ms per turn (server %.2f + client %.2f)\n",
		f.threads, f.messages, rate, res.Elapsed.Round(time.Millisecond),
		float64((serverCPU+res.CPU).Microseconds())/1000/turns, float64(serverCPU.Microseconds())/1000/turns, float64(res.CPU.Microseconds())/1000/turns)
	fmt.Fprintf(a.stdout, "  latency: request -> response p50 %s p99 %s\n", res.P50.Round(10*time.Microsecond), res.P99.Round(10*time.Microsecond))
	fmt.Fprintf(a.stdout, "http / nats-direct: %.2f x turns/s (nats-direct %.0f turns/s, CPU %.2f ms per turn)\n",
		rate/natsRate, natsRate, float64(natsCPU.Microseconds())/1000/float64(f.threads*f.messages))
	return nil
}

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
