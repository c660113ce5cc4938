package strategies_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	agentexec "github.com/artifactr/artifactr/actors/agent/exec"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/doubletext"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
)

// longEcho keeps each run active until it is cancelled.
var longEcho = agent.Echo{Delay: time.Hour}

// ignoringExec is an exec agent whose program ignores cancellation: it
// ignores SIGTERM and never reads stdin again. It emits its pid first.
func ignoringExec() agentexec.Agent {
	return agentexec.Agent{
		Path:        "/bin/sh",
		Args:        []string{"-c", `trap '' TERM; read -r turn; echo "{\"type\":\"output\",\"text\":\"pid $$\"}"; while :; do sleep 1; done`},
		CancelGrace: 200 * time.Millisecond,
	}
}

// A cancel request ends the active run as run_failed "cancelled"; the echo
// agent honours its context, so it stops at once. The time from the
// request being stored to the run_failed being stored is printed.
func TestCancel_echo(t *testing.T) {
	for _, k := range kinds {
		t.Run(string(k), func(t *testing.T) {
			s := newStore(t, k)
			startRunner(t, s, longEcho)
			th := "cancel-" + string(k)
			mustPost(t, s, th, "hello", "")
			r := activeRun(t, s, th)
			var lat []time.Duration
			for i := range 5 {
				ack, err := doubletext.Cancel(t.Context(), s, th, "", "", time.Now())
				if err != nil {
					t.Fatal(err)
				}
				got := ended(t, s, th, r.ID)
				if got.Status != projections.RunFailed || got.Reason != events.ReasonCancelled {
					t.Fatalf("run %s ended %s %q, want failed %q", r.ID, got.Status, got.Reason, events.ReasonCancelled)
				}
				lat = append(lat, storedOf(t, s, th, got.EndSeq).Sub(storedOf(t, s, th, ack.Seq)))
				if i < 4 {
					mustPost(t, s, th, fmt.Sprintf("again %d", i), "")
					r = activeRun(t, s, th, r.ID)
				}
			}
			slices.Sort(lat)
			t.Logf("%s: cancel stored -> run_failed stored: min %s, median %s, max %s (5 runs, echo agent, -race)", k, lat[0], lat[2], lat[4])
			checkLog(t, s, th)
		})
	}
}

// A cancel request naming another run, or none while no run is active,
// changes nothing.
func TestCancel_otherRunIgnored(t *testing.T) {
	s := newStore(t, mem)
	startRunner(t, s, agent.Echo{Delay: 300 * time.Millisecond})
	th := "cancel-other"
	if _, err := doubletext.Cancel(t.Context(), s, th, "", "early", time.Now()); err != nil {
		t.Fatal(err)
	}
	mustPost(t, s, th, "hello", "")
	r := activeRun(t, s, th)
	if _, err := doubletext.Cancel(t.Context(), s, th, "run-nope", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := ended(t, s, th, r.ID); got.Status != projections.RunCompleted {
		t.Fatalf("run ended %s %q, want completed", got.Status, got.Reason)
	}
	checkLog(t, s, th)
}

// An exec agent whose program ignores cancellation is killed after its
// grace period, and the run ends as run_failed "cancelled".
func TestCancel_execIgnoresCancellation(t *testing.T) {
	s := newStore(t, nats)
	startRunner(t, s, ignoringExec())
	th := "cancel-exec"
	mustPost(t, s, th, "hello", "")
	r := activeRun(t, s, th)
	pid := waitPID(t, s, th, r.ID)
	if _, err := doubletext.Cancel(t.Context(), s, th, r.ID, "c1", time.Now()); err != nil {
		t.Fatal(err)
	}
	got := ended(t, s, th, r.ID)
	if got.Status != projections.RunFailed || got.Reason != events.ReasonCancelled {
		t.Fatalf("run ended %s %q, want failed %q", got.Status, got.Reason, events.ReasonCancelled)
	}
	wantGone(t, pid)
	checkLog(t, s, th)
}

// waitPID waits for run id's first output, "pid N", and returns N.
func waitPID(t *testing.T, s events.Store, th, id string) int {
	t.Helper()
	var pid int
	testkit.CheckFor(t, wait, func() error {
		for _, r := range fold(t, s, th).Runs {
			if r.ID == id && len(r.Outputs) > 0 {
				n, err := strconv.Atoi(r.Outputs[0][len("pid "):])
				pid = n
				return err
			}
		}
		return fmt.Errorf("run %s has no output yet", id)
	})
	return pid
}

// wantGone fails unless process pid is gone: killed and reaped.
func wantGone(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("program %d still exists (kill 0: %v)", pid, err)
	}
}
