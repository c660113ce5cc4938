package httpapi

import (
	"bytes"
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	agentexec "github.com/artifactr/artifactr/actors/agent/exec"
	"github.com/artifactr/artifactr/actors/agent/openai"
	"github.com/artifactr/artifactr/events"
)

// File is the assistants file of `serve --config FILE`, in the spirit of
// langgraph.json: graph ids and the agent each runs.
//
//	{"graphs": {
//	    "echo": {"agent": "echo"},
//	    "slow": {"agent": "exec", "command": ["node", "slow-agent.mjs"], "env": ["FOO"]},
//	    "chat": {"agent": "openai", "base_url": "http://localhost:11434/v1", "model": "llama3.2"}
//	}, "default": "echo"}
//
// Each graph id is also the id of its assistant.
type File struct {
	Graphs map[string]GraphSpec `json:"graphs"`
	// Default is the graph of prompts that name none (posted by the CLI,
	// say). Default: the first graph id in sorted order.
	Default string `json:"default,omitempty"`
}

// GraphSpec is one configured agent.
type GraphSpec struct {
	// Agent is "echo", "exec" or "openai".
	Agent string `json:"agent"`
	// Description is shown in the assistant's description.
	Description string `json:"description,omitempty"`

	// Command is the exec agent's program and arguments.
	Command []string `json:"command,omitempty"`
	// Env names variables of serve's environment the program may see, or
	// sets KEY=VALUE ones (serve --agent-env).
	Env []string `json:"env,omitempty"`
	// Timeout bounds one exec turn ("30s"); default the exec agent's.
	Timeout string `json:"timeout,omitempty"`
	// Steer gives messages posted during a run to the run as steering.
	Steer bool `json:"steer,omitempty"`
	// Delay keeps each echo run active this long ("200ms"), for tests.
	Delay string `json:"delay,omitempty"`

	// BaseURL and Model are the openai agent's; its API key is read from
	// APIKeyEnv (default OPENAI_API_KEY).
	BaseURL   string `json:"base_url,omitempty"`
	Model     string `json:"model,omitempty"`
	System    string `json:"system,omitempty"`
	APIKeyEnv string `json:"api_key_env,omitempty"`
}

// LoadFile reads and checks an assistants file.
func LoadFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("httpapi: config: %w", err)
	}
	var f File
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("httpapi: config %s: %w", path, err)
	}
	if len(f.Graphs) == 0 {
		return nil, fmt.Errorf("httpapi: config %s: no graphs", path)
	}
	for id := range f.Graphs {
		if err := events.ValidateMessageID(id); err != nil {
			return nil, fmt.Errorf("httpapi: config %s: graph id %q: want 1 to 128 characters from [A-Za-z0-9_-]", path, id)
		}
	}
	if f.Default == "" {
		f.Default = slices.Sorted(func(yield func(string) bool) {
			for id := range f.Graphs {
				if !yield(id) {
					return
				}
			}
		})[0]
	}
	if _, ok := f.Graphs[f.Default]; !ok {
		return nil, fmt.Errorf("httpapi: config %s: default %q is not a graph", path, f.Default)
	}
	return &f, nil
}

// Agents builds the configured agents, by graph id. Exec programs are
// looked up now, so that a typo fails serve at start, not every run.
func (f *File) Agents() (map[string]agent.Agent, error) {
	out := make(map[string]agent.Agent, len(f.Graphs))
	for id, g := range f.Graphs {
		a, err := g.build()
		if err != nil {
			return nil, fmt.Errorf("httpapi: config: graph %s: %w", id, err)
		}
		out[id] = a
	}
	return out, nil
}

func (g GraphSpec) build() (agent.Agent, error) {
	dur := func(name, s string) (time.Duration, error) {
		if s == "" {
			return 0, nil
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("%s %q: want a duration such as 30s", name, s)
		}
		return d, nil
	}
	switch g.Agent {
	case "echo":
		d, err := dur("delay", g.Delay)
		if err != nil {
			return nil, err
		}
		return agent.Echo{Delay: d, Steer: g.Steer}, nil
	case "exec":
		if len(g.Command) == 0 {
			return nil, fmt.Errorf("exec needs a command, as in \"command\": [\"python3\", \"agent.py\"]")
		}
		if _, err := exec.LookPath(g.Command[0]); err != nil {
			return nil, fmt.Errorf("program %q cannot be run: %v", g.Command[0], err)
		}
		timeout, err := dur("timeout", g.Timeout)
		if err != nil {
			return nil, err
		}
		a := agentexec.Agent{Path: g.Command[0], Args: g.Command[1:], Timeout: timeout, Steer: g.Steer}
		for _, v := range g.Env {
			name, _, set := strings.Cut(v, "=")
			if name == "" || agentexec.Secret(name) {
				return nil, fmt.Errorf("env %q: want KEY or KEY=VALUE, never artifactr's or nats's settings", v)
			}
			if set {
				a.Env = append(a.Env, v)
			} else {
				a.PassEnv = append(a.PassEnv, name)
			}
		}
		return a, nil
	case "openai":
		keyEnv := g.APIKeyEnv
		if keyEnv == "" {
			keyEnv = "OPENAI_API_KEY"
		}
		return openai.New(openai.Config{BaseURL: g.BaseURL, Model: g.Model, System: g.System,
			APIKey: strings.TrimSpace(os.Getenv(keyEnv)), Steer: g.Steer})
	}
	return nil, fmt.Errorf("agent %q: want echo, exec or openai", g.Agent)
}

// Assistant is one assistant of the API: a configured agent.
type Assistant struct {
	// GraphID is its graph id, also accepted as its assistant id.
	GraphID string
	// Kind is the agent: echo, exec or openai.
	Kind        string
	Description string
}

// ID is the assistant's UUID, derived from its graph id (a name-based
// UUID, version 5 layout), so it is the same on every serve.
func (a Assistant) ID() string {
	h := sha1.Sum([]byte("artifactr-assistant:" + a.GraphID))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// Assistants returns the file's assistants, sorted by graph id.
func (f *File) Assistants() []Assistant {
	var out []Assistant
	for id, g := range f.Graphs {
		out = append(out, Assistant{GraphID: id, Kind: g.Agent, Description: g.Description})
	}
	slices.SortFunc(out, func(a, b Assistant) int { return strings.Compare(a.GraphID, b.GraphID) })
	return out
}
