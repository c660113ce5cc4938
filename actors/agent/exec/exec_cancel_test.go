//go:build unix

package exec_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/agent/agenttest"
	agentexec "github.com/artifactr/artifactr/actors/agent/exec"
)

// cancelRun starts e on a fresh turn, waits for its first output (the
// program is up), cancels the run and returns Run's result.
func cancelRun(t *testing.T, e agentexec.Agent) (result, *agenttest.Turn) {
	t.Helper()
	turn := agenttest.NewTurn("hi")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan result, 1)
	go func() { done <- run(ctx, e, turn) }()
	if _, err := turn.WaitOutputs(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	return <-done, turn
}

// A program that ignores cancellation (SIGTERM and EOF on stdin) is killed
// once the grace period is over.
func TestExec_Run_cancelIgnoredKilledAfterGrace(t *testing.T) {
	e := sh(`trap '' TERM; read -r turn; ` + emitPID + `while :; do sleep 1; done`)
	e.CancelGrace = 100 * time.Millisecond
	r, turn := cancelRun(t, e)
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", r.err)
	}
	wantGone(t, turn, 0)
	t.Logf("the turn took %s in all, the program killed after a grace of %s", r.elapsed, e.CancelGrace)
}

// A program that honours SIGTERM gets the chance to: it runs its handler
// (which writes to stderr) and exits within the grace period.
func TestExec_Run_cancelHonouredWithinGrace(t *testing.T) {
	e := sh(`trap 'echo stopping on TERM >&2; exit 3' TERM; read -r turn; ` + emitPID + `while :; do sleep 0.05; done`)
	e.CancelGrace = time.Minute // a kill would come far too late to pass
	r, turn := cancelRun(t, e)
	if !errors.Is(r.err, context.Canceled) || !strings.Contains(r.err.Error(), "stopping on TERM") {
		t.Fatalf("err %v, want context.Canceled with the handler's stderr", r.err)
	}
	wantGone(t, turn, 0)
}
