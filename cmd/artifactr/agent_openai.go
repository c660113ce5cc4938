package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/agent/openai"
)

// envOpenAIKey holds the API key of --agent openai. It is read from the
// environment, never a flag, so it stays out of ps and shell history.
const envOpenAIKey = "OPENAI_API_KEY"

// openaiFlags are serve's options for --agent openai.
type openaiFlags struct {
	baseURL     string
	model       string
	system      string // a file
	timeout     time.Duration
	idleTimeout time.Duration
	maxRounds   int
	maxWait     time.Duration
	noTools     bool

	built *openai.Agent // what openaiAgent made, for probe
}

// openaiFlagNames are the flags that only --agent openai takes.
var openaiFlagNames = []string{"base-url", "model", "system", "openai-timeout", "openai-idle-timeout", "openai-no-tools",
	"openai-max-tool-rounds", "openai-max-retry-wait"}

func addOpenAIFlags(cmd *cobra.Command, f *openaiFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.baseURL, "base-url", "", "--agent openai: API root of an OpenAI-compatible server, e.g. http://localhost:11434/v1 (Ollama); key from env "+envOpenAIKey)
	fl.StringVar(&f.model, "model", "", "--agent openai: model name, e.g. llama3.2")
	fl.StringVar(&f.system, "system", "", "--agent openai: file whose text is the system prompt")
	fl.DurationVar(&f.timeout, "openai-timeout", openai.DefaultRequestTimeout, "--agent openai: bound on one request, streaming included")
	fl.DurationVar(&f.idleTimeout, "openai-idle-timeout", openai.DefaultIdleTimeout, "--agent openai: fail a request after this long without a byte from the server")
	fl.IntVar(&f.maxRounds, "openai-max-tool-rounds", openai.DefaultMaxToolRounds, "--agent openai: most requests in one turn (each round of tool calls, or of steering, is one)")
	fl.DurationVar(&f.maxWait, "openai-max-retry-wait", openai.DefaultMaxRetryWait, "--agent openai: longest wait before retrying a refused request; a server asking for longer fails the run")
	fl.BoolVar(&f.noTools, "openai-no-tools", false, "--agent openai: declare no ask_user tool, for models that refuse tools")
}

// openaiAgent builds the agent from the flags and the API key in the
// environment; steer is serve's --steer. Flags of --agent openai given
// with another agent are an error, as they would be silently ignored.
func (f *openaiFlags) openaiAgent(cmd *cobra.Command, agentName string, args []string, steer bool, log *slog.Logger) (agent.Agent, error) {
	if agentName != "openai" {
		for _, n := range openaiFlagNames {
			if cmd.Flags().Changed(n) {
				return nil, usagef("--%s is for --agent openai, not %s", n, agentName)
			}
		}
		return nil, nil
	}
	switch {
	case len(args) > 0:
		return nil, usagef("--agent openai takes no program; did you mean --agent exec?")
	case f.baseURL == "":
		return nil, usagef("--agent openai needs --base-url, as in: --base-url http://localhost:11434/v1")
	case f.model == "":
		return nil, usagef("--agent openai needs --model, as in: --model llama3.2")
	case f.timeout <= 0:
		return nil, usagef("--openai-timeout %s: must be positive", f.timeout)
	case f.idleTimeout <= 0:
		return nil, usagef("--openai-idle-timeout %s: must be positive", f.idleTimeout)
	case f.maxRounds <= 0:
		return nil, usagef("--openai-max-tool-rounds %d: must be positive", f.maxRounds)
	case f.maxWait <= 0:
		return nil, usagef("--openai-max-retry-wait %s: must be positive", f.maxWait)
	}
	cfg := openai.Config{
		BaseURL:        f.baseURL,
		Model:          f.model,
		APIKey:         strings.TrimSpace(os.Getenv(envOpenAIKey)),
		RequestTimeout: f.timeout,
		IdleTimeout:    f.idleTimeout,
		MaxToolRounds:  f.maxRounds,
		MaxRetryWait:   f.maxWait,
		NoTools:        f.noTools,
		Steer:          steer,
		Logger:         log,
	}
	if f.system != "" {
		b, err := os.ReadFile(f.system)
		if err != nil {
			return nil, usagef("--system: %v", err)
		}
		if cfg.System = strings.TrimSpace(string(b)); cfg.System == "" {
			return nil, usagef("--system %s: the file is empty", f.system)
		}
	}
	a, err := openai.New(cfg)
	if err != nil {
		return nil, usage(fmt.Errorf("--agent openai: %w", err))
	}
	f.built = a
	return a, nil
}

// probe warns when --base-url does not answer, or answers that the key or
// the model is wrong: serve still starts, as the server may come up later,
// but the operator learns now why runs would fail.
func (f *openaiFlags) probe(ctx context.Context, log *slog.Logger) {
	if f.built == nil {
		return
	}
	if err := f.built.Probe(ctx); err != nil {
		log.Warn("--base-url: runs will fail until this is fixed", "err", err)
	}
}
