package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/httpapi"
)

// HTTPConfig configures [HTTP]: `artifactr bench http`'s options.
type HTTPConfig struct {
	Threads  int  // threads posting at once
	Messages int  // turns per thread
	Rounds   int  // HTTP phases, each after a NATS-direct one
	Sync     bool // fsync every JetStream write
	// CPUProfile, when set, gets a CPU profile of this process during the
	// first HTTP phase.
	CPUProfile string
	// ClientCmd returns the command of one HTTP phase's client process,
	// which runs [HTTPClient] against the API at url with thread ids
	// starting with prefix and prints its [HTTPLoopResult] as one JSON line
	// on stdout. The client is a process of its own so that its CPU is not
	// the server's. Required.
	ClientCmd func(ctx context.Context, url, prefix string) (*exec.Cmd, error)
	// Out gets the text lines. Required.
	Out io.Writer
	// Logger logs the errors of the server, the stores, the runner and the
	// API. Default discards.
	Logger *slog.Logger
}

// HTTPResult is the figures of bench http, as its --json prints them: the
// phases in the order run (nats-direct and http in turns, nats-direct
// last), the medians, and their ratio.
type HTTPResult struct {
	Fsync                    bool    `json:"fsync"`
	Phases                   []Phase `json:"phases"`
	HTTPTurnsPerSecond       float64 `json:"http_turns_per_second"`
	NATSDirectTurnsPerSecond float64 `json:"nats_direct_turns_per_second"`
	HTTPServerCPUMsPerTurn   float64 `json:"http_server_cpu_ms_per_turn"`
	HTTPClientCPUMsPerTurn   float64 `json:"http_client_cpu_ms_per_turn"`
	Ratio                    float64 `json:"http_over_nats_direct"`
}

// HTTPLoopResult is what the client process reports, as one JSON line.
type HTTPLoopResult struct {
	Turns   int           `json:"turns"`
	Elapsed time.Duration `json:"elapsed_ns"`
	P50     time.Duration `json:"p50_ns"`
	P99     time.Duration `json:"p99_ns"`
	CPU     time.Duration `json:"cpu_ns"`
}

// HTTP runs the closed loop of [ClosedLoop] on one embedded server with
// one runner and the echo agent, in turns: posting over NATS directly, then
// through the HTTP API's runs.wait from a client process (cfg.ClientCmd),
// cfg.Rounds times, and over NATS once more. It prints its lines to cfg.Out.
func HTTP(ctx context.Context, cfg HTTPConfig) (*HTTPResult, error) {
	if cfg.Threads < 1 || cfg.Messages < 1 || cfg.Rounds < 1 {
		return nil, errors.New("bench: Threads, Messages and Rounds must be at least 1")
	}
	if cfg.ClientCmd == nil {
		return nil, errors.New("bench: ClientCmd is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	quiet := cfg.Logger
	ts, err := StartTemp(ctx, "artifactr-bench-http-", !cfg.Sync, quiet, nil)
	if err != nil {
		return nil, err
	}
	defer ts.Close()
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
	if !cfg.Sync {
		note = "not fsynced"
	}
	fmt.Fprintf(cfg.Out, "bench http: embedded server (%s), one runner, echo agent, %d threads x %d turns, each thread posting its next message when its last run ended\n", note, cfg.Threads, cfg.Messages)
	out := &HTTPResult{Fsync: cfg.Sync}

	clients, err := ts.Client(ctx, quiet)
	if err != nil {
		return nil, err
	}
	defer clients.Close()
	// Rounds of NATS-direct then HTTP, and NATS-direct once more, so that
	// neither side has the warm runner or a quiet spell to itself; the ratio
	// is of the medians.
	var nd, web []Phase
	var serverCPU, clientCPU []float64
	for i := 0; i <= cfg.Rounds; i++ {
		p, err := closedPhase(ctx, cfg.Out, clients, fmt.Sprintf("nats-direct #%d", i+1), fmt.Sprintf("nd%d", i), cfg.Threads, cfg.Messages)
		if err != nil {
			return nil, err
		}
		nd = append(nd, p)
		out.Phases = append(out.Phases, p)
		if i == cfg.Rounds {
			break
		}
		h, scpu, ccpu, err := httpPhase(ctx, &cfg, l.URL, i)
		if err != nil {
			return nil, err
		}
		web = append(web, h)
		serverCPU, clientCPU = append(serverCPU, scpu), append(clientCPU, ccpu)
		out.Phases = append(out.Phases, h)
	}
	rate := func(ps []Phase) []float64 {
		var v []float64
		for _, p := range ps {
			v = append(v, p.TurnsPerSecond)
		}
		return v
	}
	cpu := func(ps []Phase) []float64 {
		var v []float64
		for _, p := range ps {
			v = append(v, p.CPUMsPerTurn)
		}
		return v
	}
	out.HTTPServerCPUMsPerTurn, out.HTTPClientCPUMsPerTurn = median(serverCPU), median(clientCPU)
	out.HTTPTurnsPerSecond, out.NATSDirectTurnsPerSecond = median(rate(web)), median(rate(nd))
	out.Ratio = out.HTTPTurnsPerSecond / out.NATSDirectTurnsPerSecond
	fmt.Fprintf(cfg.Out, "http / nats-direct: %.2f x turns/s (medians of %d and %d phases: %.0f and %.0f turns/s; CPU %.2f and %.2f ms per turn)\n",
		out.Ratio, len(web), len(nd), out.HTTPTurnsPerSecond, out.NATSDirectTurnsPerSecond, median(cpu(web)), median(cpu(nd)))
	return out, nil
}

// httpPhase runs the closed loop over HTTP from a client process of its
// own, and returns it as a phase with the server's and the client's CPU
// per turn.
func httpPhase(ctx context.Context, cfg *HTTPConfig, url string, round int) (Phase, float64, float64, error) {
	cmd, err := cfg.ClientCmd(ctx, url, fmt.Sprintf("h%d", round))
	if err != nil {
		return Phase{}, 0, 0, err
	}
	if cfg.CPUProfile != "" && round == 0 {
		stop, err := cpuProfile(cfg.CPUProfile)
		if err != nil {
			return Phase{}, 0, 0, err
		}
		defer stop()
	}
	cpu1 := cpuTime()
	got, err := cmd.Output()
	if err != nil {
		return Phase{}, 0, 0, fmt.Errorf("the HTTP client process: %w", err)
	}
	serverCPU := cpuTime() - cpu1
	var res HTTPLoopResult
	if err := json.Unmarshal(bytes.TrimSpace(got), &res); err != nil {
		return Phase{}, 0, 0, fmt.Errorf("the HTTP client process said %q: %w", got, err)
	}
	if res.Turns < 1 || res.Elapsed <= 0 {
		return Phase{}, 0, 0, fmt.Errorf("the HTTP client process reported no turns: %q", got)
	}
	turns := float64(res.Turns)
	rate := turns / res.Elapsed.Seconds()
	scpu, ccpu := ms(serverCPU)/turns, ms(res.CPU)/turns
	fmt.Fprintf(cfg.Out, "http #%d (runs.wait, client process of its own): %d threads x %d turns: %.0f turns/s (%s wall), CPU %.2f ms per turn (server %.2f + client %.2f)\n",
		round+1, cfg.Threads, cfg.Messages, rate, res.Elapsed.Round(time.Millisecond), scpu+ccpu, scpu, ccpu)
	fmt.Fprintf(cfg.Out, "  latency: request -> response p50 %s p99 %s\n", res.P50.Round(10*time.Microsecond), res.P99.Round(10*time.Microsecond))
	return Phase{
		Name: fmt.Sprintf("http #%d", round+1), Threads: cfg.Threads, Turns: res.Turns, TurnsPerSecond: rate,
		CPUMsPerTurn: scpu + ccpu, EndP50Ms: ms(res.P50), EndP99Ms: ms(res.P99),
	}, scpu, ccpu, nil
}

// HTTPClientConfig configures [HTTPClient], the client process of bench
// http.
type HTTPClientConfig struct {
	URL      string // the API's base URL
	Prefix   string // thread ids start with it
	Threads  int    // threads posting at once
	Messages int    // turns per thread
}

// HTTPClient runs the closed loop over HTTP against the API at cfg.URL:
// each thread posts to runs.wait, then posts again once it answered.
func HTTPClient(ctx context.Context, cfg HTTPClientConfig) (HTTPLoopResult, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: cfg.Threads, MaxIdleConnsPerHost: cfg.Threads, IdleConnTimeout: time.Minute}}
	var mu sync.Mutex
	var lat []time.Duration
	cpu0, start := cpuTime(), time.Now()
	err := parallel(ctx, cfg.Threads, func(ctx context.Context, i int) error {
		thread := fmt.Sprintf("%s-%d-%d", cfg.Prefix, os.Getpid(), i)
		for j := range cfg.Messages {
			body := fmt.Sprintf(`{"assistant_id":"echo","if_not_exists":"create","multitask_strategy":"enqueue","input":{"messages":[{"role":"user","content":"message %d of %s","id":"m%d"}]}}`, j, thread, j)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL+"/threads/"+thread+"/runs/wait", strings.NewReader(body))
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
		return HTTPLoopResult{}, err
	}
	return HTTPLoopResult{Turns: cfg.Threads * cfg.Messages, Elapsed: time.Since(start), P50: pct(lat, 0.5), P99: pct(lat, 0.99), CPU: cpuTime() - cpu0}, nil
}
