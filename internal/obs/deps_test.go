package obs_test

import (
	"testing"

	"github.com/artifactr/artifactr/internal/testkit"
)

// TestObs_deps_notRunner: obs sits below the runner it observes; it takes
// the runner's hooks by their method sets, and the runner (and what it
// pulls in: protoactor, the stores) stays out of its dependencies. It reads
// the store's error codes through Config.ErrorCode, so no NATS client
// either.
func TestObs_deps_notRunner(t *testing.T) {
	testkit.NoDeps(t, "github.com/artifactr/artifactr/internal/obs",
		"github.com/artifactr/artifactr/actors/runner",
		"github.com/artifactr/artifactr/events/natsstore",
		"github.com/nats-io/")
}
