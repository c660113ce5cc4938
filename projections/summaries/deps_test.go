package summaries

import (
	"os/exec"
	"strings"
	"testing"
)

// The read model depends on the store's port (events.ReadModelStore), not
// on an adapter: it imports neither natsstore nor nats.go.
func TestSummaries_deps_portsOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/artifactr/artifactr/projections/summaries").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, bad := range []string{"github.com/artifactr/artifactr/events/natsstore", "github.com/nats-io/"} {
		if strings.Contains(string(out), bad) {
			t.Fatalf("projections/summaries depends on %s", bad)
		}
	}
}
