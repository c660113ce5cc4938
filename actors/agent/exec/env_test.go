package exec_test

import (
	"strings"
	"testing"

	"github.com/artifactr/artifactr/actors/agent/agenttest"
	agentexec "github.com/artifactr/artifactr/actors/agent/exec"
)

// An exec agent that prints its environment shows no NATS URL or
// credentials: it gets PATH, HOME, LANG and what the operator names.
func TestExec_Run_scrubbedEnv(t *testing.T) {
	t.Setenv("ARTIFACTR_NATS", "nats://secret-host:4222")
	t.Setenv("ARTIFACTR_NKEY", "/data/auth/runner.nk")
	t.Setenv("ARTIFACTR_CREDS", "/data/runner.creds")
	t.Setenv("NATS_URL", "nats://secret-host:4222")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-for-agents")
	t.Setenv("AGENT_MODEL", "small")
	t.Setenv("HOME", "/home/agent")
	// The program prints its whole environment, one variable per output
	// line; the lines are coalesced into outputs, so they end in "\n".
	e := sh(`read -r turn; env | while IFS= read -r l; do printf '{"type":"output","text":"%s\\n"}\n' "$l"; done; echo '{"type":"done","output":"ok"}'`)
	e.PassEnv = []string{"AGENT_MODEL", "ARTIFACTR_NATS", "NATS_URL"} // the secret ones are dropped even when named
	e.Env = []string{"GREETING=hello", "ARTIFACTR_NKEY=/x"}
	turn := agenttest.NewTurn("hi")
	if r := run(t.Context(), e, turn); r.err != nil {
		t.Fatalf("run: %v", r.err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(strings.TrimSuffix(strings.Join(turn.Outputs(), ""), "\n"), "\n") {
		k, v, _ := strings.Cut(l, "=")
		env[k] = v
	}
	for k, v := range env {
		if agentexec.Secret(k) || strings.Contains(v, "secret-host") || strings.Contains(v, ".nk") || strings.Contains(v, "creds") || k == "AWS_SECRET_ACCESS_KEY" {
			t.Errorf("agent sees %s=%s", k, v)
		}
	}
	for k, want := range map[string]string{"AGENT_MODEL": "small", "GREETING": "hello", "HOME": "/home/agent"} {
		if env[k] != want {
			t.Errorf("agent env %s=%q, want %q (all: %v)", k, env[k], want, env)
		}
	}
	if env["PATH"] == "" {
		t.Errorf("agent has no PATH: %v", env)
	}
}
