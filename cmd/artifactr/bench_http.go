package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/internal/bench"
)

// benchHTTPFlags are `bench http` options.
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

// benchClientEnv marks the process bench http starts as its HTTP client, so
// that a test binary standing in for artifactr runs the command.
const benchClientEnv = "ARTIFACTR_BENCH_HTTP_CLIENT"

// benchHTTPClient is the client process: the closed loop over HTTP, its
// figures printed as one JSON line.
func (a *app) benchHTTPClient(ctx context.Context, f *benchHTTPFlags) error {
	res, err := bench.HTTPClient(ctx, bench.HTTPClientConfig{URL: f.clientURL, Prefix: f.prefix, Threads: f.threads, Messages: f.messages})
	if err != nil {
		return fail(err)
	}
	return json.NewEncoder(a.stdout).Encode(res)
}

// benchHTTPClientCmd is the command of one HTTP phase's client process:
// this executable, as bench http --client-url.
func (a *app) benchHTTPClientCmd(f *benchHTTPFlags) func(ctx context.Context, url, prefix string) (*exec.Cmd, error) {
	return func(ctx context.Context, url, prefix string) (*exec.Cmd, error) {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(ctx, exe, "bench", "http", "--client-url", url, "--prefix", prefix,
			"--threads", fmt.Sprint(f.threads), "--messages", fmt.Sprint(f.messages), "--max-time", f.maxTime.String())
		cmd.Stderr = a.stderr
		cmd.Env = append(os.Environ(), benchClientEnv+"=1")
		return cmd, nil
	}
}

// benchHTTP runs the benchmark (internal/bench) with f's options.
func (a *app) benchHTTP(ctx context.Context, f *benchHTTPFlags) (*benchHTTPJSON, error) {
	if f.threads < 1 || f.messages < 1 || f.rounds < 1 {
		return nil, fmt.Errorf("--threads, --messages and --rounds must each be at least 1, not %d, %d and %d", f.threads, f.messages, f.rounds)
	}
	return bench.HTTP(ctx, bench.HTTPConfig{Threads: f.threads, Messages: f.messages, Rounds: f.rounds, Sync: !f.noSync,
		CPUProfile: f.cpuProfile, ClientCmd: a.benchHTTPClientCmd(f), Out: a.stdout, Logger: a.errorLogger()})
}
