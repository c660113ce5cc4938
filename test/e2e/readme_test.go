package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artifactr/artifactr/internal/testkit"
)

// cliEnv runs an artifactr client command with env added to its
// environment, as a user who exported it.
func cliEnv(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(childEnv(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("artifactr %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// showJSON is the part of show --json these tests read.
type showJSON struct {
	ActiveRun *string `json:"active_run"`
	Runs      []struct {
		ID        string `json:"id"`
		Status    string `json:"status"`
		PromptSeq uint64 `json:"prompt_seq"`
		Reason    string `json:"reason"`
	} `json:"runs"`
}

// TestReadme_doubleTexting runs the README's double-texting example as
// written, against examples/slow-agent.py and with NATS_URL exported; only
// its sleeps are waits for the run to be active here (issue 22, item 8: with
// the echo agent the run ended before "another" was posted).
func TestReadme_doubleTexting(t *testing.T) {
	listen := freeListen(t)
	env := []string{"NATS_URL=nats://" + listen}
	serve(t, "serve-slow", "--data", t.TempDir(), "--listen", listen, "--no-sync",
		"--agent", "exec", "--", "python3", filepath.Join(repoRoot, "examples", "slow-agent.py"))
	run := func(want int, args ...string) (string, string) {
		t.Helper()
		code, out, errOut := cliEnv(t, env, args...)
		if code != want {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
		}
		return out, errOut
	}
	show := func() showJSON {
		t.Helper()
		out, _ := run(0, "show", "t3", "--json")
		var v showJSON
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("show --json: %v\n%s", err, out)
		}
		return v
	}
	// "sleep": wait until a run is active on the prompt at seq.
	activeOn := func(seq string) {
		t.Helper()
		testkit.CheckFor(t, 20*time.Second, func() error {
			v := show()
			for _, r := range v.Runs {
				if v.ActiveRun != nil && r.ID == *v.ActiveRun && fmt.Sprint(r.PromptSeq) == seq {
					return nil
				}
			}
			return fmt.Errorf("no run active on %s: %+v", seq, v)
		})
	}

	run(0, "configure", "t3", "--strategy", "reject")
	long, _ := run(0, "post", "t3", "a long job with many words to say")
	activeOn(strings.TrimSpace(long))
	_, errOut := run(1, "post", "t3", "another")
	if !strings.Contains(errOut, "thread busy") || !strings.Contains(errOut, "nothing written") {
		t.Errorf("post another: %s", errOut)
	}
	out, _ := run(0, "post", "t3", "stop that, do this", "--strategy", "interrupt", "--follow")
	if !strings.HasSuffix(out, "\nslow: stop that, do this\n") {
		t.Errorf("post --strategy interrupt --follow: %q", out)
	}
	last, _ := run(0, "post", "t3", "one two three four five six")
	activeOn(strings.TrimSpace(last))
	run(0, "cancel", "t3")
	testkit.CheckFor(t, 20*time.Second, func() error {
		v := show()
		if v.ActiveRun != nil || len(v.Runs) != 3 {
			return fmt.Errorf("not settled: %+v", v)
		}
		return nil
	})
	v := show()
	for i, want := range []string{"failed interrupted", "completed ", "failed cancelled"} {
		if got := v.Runs[i].Status + " " + v.Runs[i].Reason; got != want {
			t.Errorf("run %d: %q, want %q", i, got, want)
		}
	}
	auditClean(t, "nats://"+listen)
}

// TestServe_secondSignalQuiet: a second signal stops serve at once
// without a warning: it is a deliberate stop, not a fault (issue 22, item
// 8: the runner warned "cannot follow the stream; retrying" as the store
// closed under it).
func TestServe_secondSignalQuiet(t *testing.T) {
	listen := freeListen(t)
	url := "nats://" + listen
	// No --no-sync, whose warning is serve's own: any WARN is a fault.
	s := serve(t, "serve-quit", "--data", t.TempDir(), "--listen", listen, "--echo-delay", "1m")
	for _, th := range []string{"t1", "t2"} {
		if code, _, errOut := cli(t, "post", th, "hold on", "--nats", url); code != 0 {
			t.Fatalf("post: exit %d: %s", code, errOut)
		}
	}
	testkit.CheckFor(t, 20*time.Second, func() error {
		code, out, _ := cli(t, "threads", "--json", "--nats", url)
		if code != 0 || strings.Count(out, `"status": "active"`) != 2 {
			return fmt.Errorf("runs not active yet:\n%s", out)
		}
		return nil
	})
	s.signal(syscall.SIGTERM)
	s.waitOutput("draining", 10*time.Second)
	s.signal(syscall.SIGTERM)
	if code := s.wait(10 * time.Second); code != 1 {
		t.Errorf("serve after a second signal: exit %d, want 1", code)
	}
	errOut := s.errOut.String()
	if !strings.Contains(errOut, "exiting without releasing claims") {
		t.Errorf("serve does not say it left the claims:\n%s", errOut)
	}
	for _, bad := range []string{"WARN", "ERROR", "retrying", "again;"} {
		if strings.Contains(errOut, bad) {
			t.Errorf("serve's log after a deliberate stop has %q:\n%s", bad, errOut)
		}
	}
}
