//go:build linux

package exec_test

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/agent/agenttest"
	agentexec "github.com/artifactr/artifactr/actors/agent/exec"
	"github.com/artifactr/artifactr/internal/testkit"
)

// startReaper makes the test process a subreaper for the test.
func startReaper(t *testing.T) {
	t.Helper()
	stop, err := agentexec.StartReaper()
	if err != nil {
		t.Fatalf("StartReaper: %v", err)
	}
	t.Cleanup(stop)
}

// pidsIn reads the pids a program emitted as "pid pid ...".
func pidsIn(t *testing.T, turn *agenttest.Turn) []int {
	t.Helper()
	var pids []int
	for _, f := range strings.Fields(strings.Join(turn.Outputs(), " ")) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("output %q is not a pid", f)
		}
		pids = append(pids, pid)
	}
	if len(pids) == 0 {
		t.Fatal("no pids emitted")
	}
	return pids
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && !strings.HasPrefix(string(b[i+1:]), " Z")
}

// wantAllGone fails if a process is still alive: a SIGKILL takes effect
// soon after kill(2) returns, so it waits a little for that.
func wantAllGone(t *testing.T, pids []int) {
	t.Helper()
	err := testkit.Poll(10*time.Second, func() error {
		for _, pid := range pids {
			if alive(pid) {
				return fmt.Errorf("process %d outlived its run", pid)
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// setsidChild is a script line that starts a child in a session of its
// own (out of the program's process group) and emits its pid.
const setsidChild = `setsid sleep 300 </dev/null >/dev/null 2>&1 & echo "{\"type\":\"output\",\"text\":\"$! \"}"; `

// A child that left the program's process group with setsid is killed when
// the run ends, though its parent exited first: it became the reaper's.
func TestExec_Run_killsSetsidChildAfterDone(t *testing.T) {
	startReaper(t)
	turn := agenttest.NewTurn("hi")
	r := run(t.Context(), sh(`read -r turn; `+setsidChild+`echo '{"type":"done"}'; exit 0`), turn)
	if r.err != nil {
		t.Fatalf("run: %v", r.err)
	}
	wantAllGone(t, pidsIn(t, turn))
}

// The same child of a program still running when its run times out is
// found through its parent and killed, with or without the reaper; with
// it, a double-forked grandchild too.
func TestExec_Run_killsSetsidTreeOnTimeout(t *testing.T) {
	for _, reaper := range []bool{false, true} {
		t.Run("reaper="+strconv.FormatBool(reaper), func(t *testing.T) {
			script := `read -r turn; ` + setsidChild
			want := 1
			if reaper {
				startReaper(t)
				script += `(setsid sh -c 'echo "{\"type\":\"output\",\"text\":\"$$ \"}"; exec sleep 300' &) ; `
				want = 2
			}
			turn := agenttest.NewTurn("hi")
			e := sh(script + `sleep 300`)
			e.Timeout = time.Second
			r := run(t.Context(), e, turn)
			if r.err == nil || !strings.HasPrefix(r.err.Error(), "exec: timed out") {
				t.Fatalf("err %v, want the timeout", r.err)
			}
			pids := pidsIn(t, turn)
			if len(pids) != want {
				t.Fatalf("pids %v, want %d", pids, want)
			}
			wantAllGone(t, pids)
		})
	}
}

// Stopping the reaper (serve's exit) kills the programs still running and
// what they started.
func TestExec_StartReaper_stopKillsRunning(t *testing.T) {
	stop, err := agentexec.StartReaper()
	if err != nil {
		t.Fatalf("StartReaper: %v", err)
	}
	defer stop()
	turn := agenttest.NewTurn("hi")
	res := make(chan result, 1)
	go func() {
		res <- run(context.WithoutCancel(t.Context()), sh(`read -r turn; `+setsidChild+`trap '' TERM; sleep 300`), turn)
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := turn.WaitOutputs(ctx, 1); err != nil {
		t.Fatalf("no pid: %v", err)
	}
	stop()
	var r result
	select {
	case r = <-res:
	case <-time.After(30 * time.Second):
		t.Fatal("the program still runs 30s after the reaper stopped")
	}
	if r.err == nil || !strings.Contains(r.err.Error(), "signal: killed") {
		t.Errorf("err %v, want the program killed", r.err)
	}
	wantAllGone(t, pidsIn(t, turn))
}

// With User set the program runs as that user, and cannot read the
// environment of the process that started it.
func TestExec_Run_asUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	t.Setenv("ARTIFACTR_TEST_SECRET", "shh") // in this process's environ
	turn := agenttest.NewTurn("hi")
	e := sh(`read -r turn; if cat /proc/$PPID/environ >/dev/null 2>&1; then env=readable; else env=unreadable; fi
		echo "{\"type\":\"done\",\"output\":\"$(id -u):$(id -g):$(id -G):$env\"}"`)
	e.User = "nobody"
	r := run(t.Context(), e, turn)
	if r.err != nil {
		t.Fatalf("run: %v", r.err)
	}
	if want := u.Uid + ":" + u.Gid + ":" + u.Gid + ":unreadable"; r.out != want {
		t.Errorf("program says %q, want %q (uid:gid:groups:parent environ)", r.out, want)
	}
	e.User = "no-such-user-here"
	if r := run(t.Context(), e, agenttest.NewTurn("hi")); r.err == nil || !strings.Contains(r.err.Error(), `user "no-such-user-here"`) {
		t.Errorf("unknown user: err %v", r.err)
	}
}
