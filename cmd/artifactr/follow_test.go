package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/internal/testkit"
)

// gateAgent is an exec agent that writes one output, then waits until the
// file named by its argument exists before it writes the second and ends:
// a run the test holds open between two outputs.
const gateAgent = `import json, os, sys, time
def send(o):
    sys.stdout.write(json.dumps(o) + "\n"); sys.stdout.flush()
turn = json.loads(sys.stdin.readline())
send({"type": "output", "text": "part-1 "})
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
send({"type": "output", "text": "part-2"})
send({"type": "done"})
`

// TestRun_postFollow: post --follow prints a run's first output while the
// run is still active, then the rest, and exits at its end; with --json it
// prints one event per line, from the post to the run's end. post --wait
// still prints the whole output once, at the end.
func TestRun_postFollow(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "gate.py")
	if err := os.WriteFile(script, []byte(gateAgent), 0o644); err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(dir, "gate")
	url, _ := serveInProcess(t, "--agent", "exec", "--", "python3", script, gate)

	for i, mode := range [][]string{{"--follow"}, {"--follow", "--json"}, {"--wait"}} {
		_ = os.Remove(gate)
		var out, errOut testkit.SyncBuffer
		done := make(chan int, 1)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		args := append([]string{"post", fmt.Sprintf("t%d", i), "go", "--nats", url}, mode...)
		go func() { done <- run(ctx, args, &out, &errOut) }()

		// The run is held between its outputs: what is printed now was
		// printed as it was written.
		started := "part-1"
		if mode[0] == "--wait" {
			started = "\n" // only the sequence: --wait prints the output at the end
		}
		testkit.CheckFor(t, 20*time.Second, func() error {
			if !strings.Contains(out.String(), started) {
				return fmt.Errorf("%v: no %q yet:\n%s%s", mode, started, out.String(), errOut.String())
			}
			return nil
		})
		select {
		case code := <-done:
			t.Fatalf("%v: exited %d before the run ended:\n%s%s", mode, code, out.String(), errOut.String())
		default:
		}
		if mode[0] == "--wait" && strings.Contains(out.String(), "part-1") {
			t.Errorf("--wait printed an output before the run ended:\n%s", out.String())
		}
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		code := <-done
		cancel()
		if code != exitOK {
			t.Fatalf("%v: exit %d\n%s%s", mode, code, out.String(), errOut.String())
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(mode) == 1 {
			if len(lines) != 2 || lines[1] != "part-1 part-2" {
				t.Errorf("%v: stdout %q, want the sequence, then \"part-1 part-2\"", mode, out.String())
			}
			continue
		}
		var types []string
		for _, l := range lines {
			var ev eventJSON
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("--follow --json: line %q: %v", l, err)
			}
			types = append(types, ev.Type)
		}
		if want := "message_posted run_started run_output run_output run_completed"; strings.Join(types, " ") != want {
			t.Errorf("--follow --json: events %v, want %s", types, want)
		}
	}
}

// TestRun_postFollowExits: --follow keeps --wait's exit codes: a failed
// run exits 1 with its reason, and a question is printed and exits 0.
func TestRun_postFollowExits(t *testing.T) {
	url, _ := serveInProcess(t)
	code, out, errOut := runCLI(t, t.Context(), "post", "t1", "fail: boom", "--follow", "--nats", url)
	if code != exitFail || !strings.Contains(errOut, "failed: boom") {
		t.Errorf("a failing run: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, t.Context(), "post", "t1", "ask: name?", "--follow", "--nats", url)
	if code != exitOK || !strings.Contains(out, "asks: name?") {
		t.Errorf("a run that asks: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, t.Context(), "post", "t1", "Ada", "--follow", "--nats", url)
	if code != exitOK || !strings.HasSuffix(out, "\necho: name? -> Ada\n") {
		t.Errorf("the answer: exit %d\n%s%s", code, out, errOut)
	}
}
