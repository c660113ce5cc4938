package main

import (
	"fmt"
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
	noTools     bool
}

// openaiFlagNames are the flags that only --agent openai takes.
var openaiFlagNames = []string{"base-url", "model", "system", "openai-timeout", "openai-idle-timeout", "openai-no-tools"}

func addOpenAIFlags(cmd *cobra.Command, f *openaiFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.baseURL, "base-url", "", "--agent openai: API root of an OpenAI-compatible server, e.g. http://localhost:11434/v1 (Ollama); key from env "+envOpenAIKey)
	fl.StringVar(&f.model, "model", "", "--agent openai: model name, e.g. llama3.2")
	fl.StringVar(&f.system, "system", "", "--agent openai: file whose text is the system prompt")
	fl.DurationVar(&f.timeout, "openai-timeout", openai.DefaultRequestTimeout, "--agent openai: bound on one request, streaming included")
	fl.DurationVar(&f.idleTimeout, "openai-idle-timeout", openai.DefaultIdleTimeout, "--agent openai: fail a request after this long without a byte from the server")
	fl.BoolVar(&f.noTools, "openai-no-tools", false, "--agent openai: declare no ask_user tool, for models that refuse tools")
}

// openaiAgent builds the agent from the flags and the API key in the
// environment; steer is serve's --steer. Flags of --agent openai given
// with another agent are an error, as they would be silently ignored.
func (f *openaiFlags) openaiAgent(cmd *cobra.Command, agentName string, args []string, steer bool) (agent.Agent, error) {
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
	}
	cfg := openai.Config{
		BaseURL:        f.baseURL,
		Model:          f.model,
		APIKey:         strings.TrimSpace(os.Getenv(envOpenAIKey)),
		RequestTimeout: f.timeout,
		IdleTimeout:    f.idleTimeout,
		NoTools:        f.noTools,
		Steer:          steer,
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
	return a, nil
}
