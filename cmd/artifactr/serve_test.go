package main

import (
	"artifactr/internal/testkit"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

var listenRE = regexp.MustCompile(`NATS listening on (nats://[^,\s]+)`)

// serveInProcess starts `serve` in-process on a free port and returns its
// URL; the server drains and stops when the test ends.
func serveInProcess(t *testing.T, args ...string) (string, *testkit.SyncBuffer) {
	t.Helper()
	t.Setenv(envNATS, "")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut testkit.SyncBuffer
	// Made before the stop below is registered, so that it is removed
	// after serve stopped writing to it (cleanups run last first).
	data := t.TempDir()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--data", data, "--listen", "127.0.0.1:0", "--no-sync", "--log-level", "warn"}, args...), &out, &errOut)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != exitOK {
				t.Errorf("serve exit %d; stderr:\n%s", code, errOut.String())
			}
			if !strings.Contains(out.String(), "stopped:") {
				t.Errorf("serve did not report its stop:\n%s", out.String())
			}
		case <-time.After(20 * time.Second):
			t.Errorf("serve did not stop; stdout:\n%s", out.String())
		}
	})
	var url string
	testkit.CheckFor(t, 15*time.Second, func() error {
		select {
		case code := <-done:
			t.Fatalf("serve exited %d; stderr:\n%s", code, errOut.String())
		default:
		}
		s := out.String()
		if !strings.Contains(s, " ready on stream ") {
			return fmt.Errorf("serve not ready:\n%s", s)
		}
		url = listenRE.FindStringSubmatch(s)[1]
		return nil
	})
	return url, &out
}

// TestRun_serveAndClients drives an in-process serve with the client
// commands, in-process too.
func TestRun_serveAndClients(t *testing.T) {
	url, _ := serveInProcess(t, "--claim-ttl", "2s")
	ctx := t.Context()
	nats := []string{"--nats", url}

	code, out, errOut := runCLI(t, ctx, append([]string{"post", "t1", "hello", "--id", "m1", "--wait"}, nats...)...)
	if code != exitOK || !strings.Contains(out, "echo: hello") {
		t.Fatalf("post --wait: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, ctx, append([]string{"post", "t1", "hello", "--id", "m1"}, nats...)...)
	if code != exitOK || !strings.Contains(out, "duplicate") {
		t.Errorf("repeat post: exit %d, stdout %q; want duplicate", code, out)
	}
	code, _, errOut = runCLI(t, ctx, append([]string{"post", "t1", "fail: disk full", "--wait"}, nats...)...)
	if code != exitFail || !strings.Contains(errOut, "disk full") {
		t.Errorf("failing run: exit %d, stderr %q", code, errOut)
	}

	code, out, _ = runCLI(t, ctx, append([]string{"threads", "--json"}, nats...)...)
	var sums []threadSummary
	if err := json.Unmarshal([]byte(out), &sums); code != exitOK || err != nil || len(sums) != 1 || sums[0].Runs != 2 {
		t.Errorf("threads --json: exit %d, err %v:\n%s", code, err, out)
	}

	code, out, _ = runCLI(t, ctx, append([]string{"show", "t1", "--json"}, nats...)...)
	var v threadView
	if err := json.Unmarshal([]byte(out), &v); code != exitOK || err != nil {
		t.Fatalf("show --json: exit %d, err %v:\n%s", code, err, out)
	}
	if len(v.Runs) != 2 || v.Runs[0].Output != "echo: hello" || v.Runs[1].Status != "failed" || v.Messages[0].Consumed == nil {
		t.Errorf("show --json: unexpected state:\n%s", out)
	}
	code, out, _ = runCLI(t, ctx, append([]string{"show", "t1", "--at", "1"}, nats...)...)
	if code != exitOK || !strings.Contains(out, "pending") || strings.Contains(out, "runs:") {
		t.Errorf("show --at 1 should show only the pending post:\n%s", out)
	}

	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	code, out, _ = runCLI(t, wctx, append([]string{"watch", "t1", "--from", "all", "--json"}, nats...)...)
	if code != exitOK {
		t.Errorf("watch: exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var first eventJSON
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.Seq != 1 || first.Type != "message_posted" || first.Thread != "t1" {
		t.Errorf("watch --json first line %q: %+v, %v", lines[0], first, err)
	}

	code, out, _ = runCLI(t, ctx, append([]string{"audit"}, nats...)...)
	if code != exitOK || !strings.Contains(out, "audit OK") {
		t.Errorf("audit: exit %d:\n%s", code, out)
	}
	code, out, _ = runCLI(t, ctx, append([]string{"audit", "--thread", "t1", "--json"}, nats...)...)
	if code != exitOK || !strings.Contains(out, `"ok": true`) {
		t.Errorf("audit --thread --json: exit %d:\n%s", code, out)
	}
}

// TestRun_postWaitTimeout: --wait gives up after --wait-timeout and says
// where the message is.
func TestRun_postWaitTimeout(t *testing.T) {
	url, _ := serveInProcess(t, "--echo-delay", "1m", "--shutdown-grace", "100ms")
	args := []string{"post", "t1", "hi", "--nats", url, "--wait", "--wait-timeout", "500ms"}
	code, _, errOut := runCLI(t, t.Context(), args...)
	if code != exitFail || !strings.Contains(errOut, "gave up waiting after 500ms") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
	if !strings.Contains(errOut, "still active") && !strings.Contains(errOut, "still pending") {
		t.Errorf("stderr does not say where the message is:\n%s", errOut)
	}
}
