package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Assistants runs each turn with the agent its prompt names
// ([Message.Assistant]): several configured agents behind one runner, the
// HTTP API's assistants. A prompt that names none, or a name not in Agents,
// runs with the Default agent.
type Assistants struct {
	// Default names the agent of prompts that name none. It must be a key
	// of Agents.
	Default string
	// Agents are the agents by name.
	Agents map[string]Agent
}

// NewAssistants checks agents and def and returns the router.
func NewAssistants(def string, agents map[string]Agent) (Assistants, error) {
	if len(agents) == 0 {
		return Assistants{}, fmt.Errorf("agent: no assistants")
	}
	if agents[def] == nil {
		return Assistants{}, fmt.Errorf("agent: default assistant %q is not one of %s", def, strings.Join(slices.Sorted(maps.Keys(agents)), ", "))
	}
	return Assistants{Default: def, Agents: agents}, nil
}

// Name is the default agent's name: run_started names it.
func (a Assistants) Name() string { return a.Agents[a.Default].Name() }

// Steerable reports whether every agent takes steering: a message given to a
// run as steering must reach an agent that reads it.
func (a Assistants) Steerable() bool {
	for _, ag := range a.Agents {
		if !ag.Steerable() {
			return false
		}
	}
	return true
}

// For returns the agent that runs a prompt naming assistant.
func (a Assistants) For(assistant string) Agent {
	if ag := a.Agents[assistant]; ag != nil {
		return ag
	}
	return a.Agents[a.Default]
}

// Run runs the turn with its prompt's agent.
func (a Assistants) Run(ctx context.Context, t Turn) (string, error) {
	return a.For(t.Prompt().Assistant).Run(ctx, t)
}
