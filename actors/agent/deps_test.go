package agent_test

import (
	"testing"

	"github.com/artifactr/artifactr/internal/testkit"
)

// The agent types link no process handling: a package that needs only them
// (the pure core, an agent that calls an HTTP API) does not get os/exec.
// The exec agent lives in actors/agent/exec.
func TestAgent_deps_noExec(t *testing.T) {
	testkit.NoDeps(t, "github.com/artifactr/artifactr/actors/agent", "os/exec", "github.com/artifactr/artifactr/actors/agent/exec")
}
