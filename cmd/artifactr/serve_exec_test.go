//go:build linux

package main

import (
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
