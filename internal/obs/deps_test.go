package obs_test

import (
	"testing"

	"github.com/artifactr/artifactr/internal/testkit"
)

// TestObs_deps_notRunner: obs sits below the runner it observes; it takes
// the runner's hooks by their method sets, and the runner (and what it
// pulls in: protoactor, the stores) stays out of its dependencies.
func TestObs_deps_notRunner(t *testing.T) {
	testkit.NoDeps(t, "github.com/artifactr/artifactr/internal/obs", "github.com/artifactr/artifactr/actors/runner")
}
