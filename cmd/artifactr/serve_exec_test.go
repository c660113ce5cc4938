//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artifactr/artifactr/internal/testkit"
)

// serve's exec-agent flags are checked before anything starts.
func TestRun_serveExecFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--exec-user", "nobody"},
		{"serve", "--exec-max-output-bytes", "10"},
		{"serve", "--agent", "exec", "--exec-max-output-bytes", "0", "--", "/bin/sh"},
		{"serve", "--agent", "exec", "--exec-max-output-events", "-1", "--", "/bin/sh"},
		{"serve", "--agent", "exec", "--exec-user", "no-such-user-here", "--", "/bin/sh"},
	} {
		data := t.TempDir()
		code, _, errOut := runCLI(t, t.Context(), append(args, "--data", data)...)
		if code != exitUsage || !strings.Contains(errOut, "--exec-") {
			t.Errorf("%q: exit %d, stderr %q; want %d naming the flag", args, code, errOut, exitUsage)
		}
		if ents, _ := os.ReadDir(data); len(ents) != 0 {
			t.Errorf("%q wrote %d entries to --data", args, len(ents))
		}
	}
}

// Issue 23: an exec program run by serve with --exec-user cannot read
// serve's environment or its nkey seeds, and a setsid child it leaves
// does not outlive its run.
func TestRun_serveExecUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("--exec-user needs root")
	}
	dir := t.TempDir()
	// The program, as nobody, reads its script here and writes child.pid.
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "agent.sh")
	pidFile := filepath.Join(dir, "child.pid")
	data := filepath.Join(dir, "data")
	// serve's command line names --data; in-process here, so the script
	// is told it.
	if err := os.WriteFile(script, []byte(`read -r turn
data=`+data+`
if cat /proc/$PPID/environ >/dev/null 2>&1; then env=readable; else env=unreadable; fi
if cat "$data"/auth/*.nk >/dev/null 2>&1; then seeds=readable; else seeds=unreadable; fi
setsid sleep 300 </dev/null >/dev/null 2>&1 &
echo $! > `+pidFile+`
echo "{\"type\":\"done\",\"output\":\"uid=$(id -u) environ=$env seeds=$seeds\"}"
`), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, data, "--auth", "--agent", "exec", "--exec-user", "nobody", "--", "/bin/sh", script)
	defer s.stop()
	nats := []string{"--nats", s.url, "--nkey", filepath.Join(data, "auth", "client.nk")}
	code, out, errOut := runCLI(t, t.Context(), append([]string{"post", "t1", "who are you?", "--wait"}, nats...)...)
	if code != exitOK {
		t.Fatalf("post --wait: exit %d\n%s%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n") // the post's sequence, then the reply
	if want := "uid=65534 environ=unreadable seeds=unreadable"; lines[len(lines)-1] != want {
		t.Errorf("the program says %q, want %q", lines[len(lines)-1], want)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	testkit.CheckFor(t, 10*time.Second, func() error {
		if err := syscall.Kill(pid, 0); err == nil {
			return fmt.Errorf("the setsid child %d outlived its run", pid)
		}
		return nil
	})
}

// replyAgent answers "progress" with an output and then a final output,
// "stream" with outputs and an empty done, and "history" with the roles and
// texts of its turn's history, as JSON.
const replyAgent = `import json, sys
turn = json.loads(sys.stdin.readline())
assert turn["protocol"] == 3, turn
p = turn["prompt"]["text"]
def say(o): print(json.dumps(o), flush=True)
if p == "progress":
    say({"type": "output", "text": "thinking..."})
    say({"type": "done", "output": "the answer"})
elif p == "stream":
    say({"type": "output", "text": "stre"})
    say({"type": "output", "text": "amed"})
    say({"type": "done"})
else:
    say({"type": "done", "output": json.dumps([[m["role"], m.get("run", ""), m["text"]] for m in turn["history"]])})
`

// Issue 22: one rule for outputs and done.output, the same in post --wait
// and show (projections.Run.Reply), and turn.history carries earlier runs'
// replies with their roles.
func TestRun_execReplyRule(t *testing.T) {
	script := filepath.Join(t.TempDir(), "agent.py")
	if err := os.WriteFile(script, []byte(replyAgent), 0o644); err != nil {
		t.Fatal(err)
	}
	url, _ := serveInProcess(t, "--agent", "exec", "--", "python3", script)
	nats := []string{"--nats", url}
	wait := func(text string) string {
		t.Helper()
		code, out, errOut := runCLI(t, t.Context(), append([]string{"post", "t1", text, "--wait"}, nats...)...)
		if code != exitOK {
			t.Fatalf("post %q --wait: exit %d\n%s%s", text, code, out, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n") // the post's sequence, then the reply
		return lines[len(lines)-1]
	}
	if got := wait("progress"); got != "the answer" {
		t.Errorf("outputs then done.output: post --wait prints %q, want done.output", got)
	}
	if got := wait("stream"); got != "streamed" {
		t.Errorf("outputs then an empty done: post --wait prints %q, want the outputs joined", got)
	}
	got := wait("history")
	var hist [][3]string
	if err := json.Unmarshal([]byte(got), &hist); err != nil {
		t.Fatalf("history reply %q: %v", got, err)
	}
	want := [][3]string{{"user", "", "progress"}, {"assistant", "run-1-2", "the answer"}, {"user", "", "stream"}, {"assistant", "run-3-4", "streamed"}}
	if len(hist) != len(want) {
		t.Fatalf("history %q, want %q", hist, want)
	}
	for i := range want {
		// Run ids name the claim and the run's start: compare the shape.
		if hist[i][0] != want[i][0] || hist[i][2] != want[i][2] || (hist[i][1] == "") != (want[i][1] == "") {
			t.Errorf("history[%d] = %q, want %q", i, hist[i], want[i])
		}
	}

	code, out, _ := runCLI(t, t.Context(), append([]string{"show", "t1", "--json"}, nats...)...)
	var v struct {
		Runs []struct{ Reply string }
	}
	if err := json.Unmarshal([]byte(out), &v); code != exitOK || err != nil || len(v.Runs) != 3 {
		t.Fatalf("show --json: exit %d, %v:\n%s", code, err, out)
	}
	if v.Runs[0].Reply != "the answer" || v.Runs[1].Reply != "streamed" {
		t.Errorf("show --json replies %q, %q; want what post --wait printed", v.Runs[0].Reply, v.Runs[1].Reply)
	}
	code, out, _ = runCLI(t, t.Context(), append([]string{"show", "t1"}, nats...)...)
	if code != exitOK || !strings.Contains(out, `result:  "the answer"`) || !strings.Contains(out, `result:  "streamed"`) {
		t.Errorf("show: exit %d, want both replies as results:\n%s", code, out)
	}
}
