package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/internal/testkit"
)

var listenRE = regexp.MustCompile(`NATS listening on (nats://[^,\s]+)`)

// serveInProcess starts `serve` in-process on a free port and returns its
// URL; the server drains and stops when the test ends.
func serveInProcess(t *testing.T, args ...string) (string, *testkit.SyncBuffer) {
	t.Helper()
	s := startServe(t, t.TempDir(), args...)
	t.Cleanup(s.stop)
	return s.url, &s.out
}

// inProcessServe is a `serve` running in-process.
type inProcessServe struct {
	t           *testing.T
	url         string
	out, errOut testkit.SyncBuffer
	cancel      context.CancelFunc
	done        chan int
	stopped     bool
}

// startServe starts `serve --data data` in-process on a free port and waits
// until it is ready. Stop it with stop.
func startServe(t *testing.T, data string, args ...string) *inProcessServe {
	t.Helper()
	t.Setenv(envNATS, "")
	t.Setenv(envNATSURL, "")
	ctx, cancel := context.WithCancel(context.Background())
	s := &inProcessServe{t: t, cancel: cancel, done: make(chan int, 1)}
	go func() {
		s.done <- run(ctx, append([]string{"serve", "--data", data, "--listen", "127.0.0.1:0", "--no-sync", "--log-level", "warn"}, args...), &s.out, &s.errOut)
	}()
	testkit.CheckFor(t, 15*time.Second, func() error {
		select {
		case code := <-s.done:
			cancel()
			t.Fatalf("serve exited %d; stderr:\n%s", code, s.errOut.String())
		default:
		}
		out := s.out.String()
		if !strings.Contains(out, " ready on stream ") {
			return fmt.Errorf("serve not ready:\n%s", out)
		}
		s.url = listenRE.FindStringSubmatch(out)[1]
		return nil
	})
	return s
}

// stop drains the serve and checks that it stopped cleanly. It is safe to
// call more than once.
func (s *inProcessServe) stop() {
	t := s.t
	t.Helper()
	if s.stopped {
		return
	}
	s.stopped = true
	s.cancel()
	select {
	case code := <-s.done:
		if code != exitOK {
			t.Errorf("serve exit %d; stderr:\n%s", code, s.errOut.String())
		}
		if !strings.Contains(s.out.String(), "stopped:") {
			t.Errorf("serve did not report its stop:\n%s", s.out.String())
		}
	case <-time.After(20 * time.Second):
		t.Errorf("serve did not stop; stdout:\n%s", s.out.String())
	}
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

// TestRun_serveSameDataDir: a second serve on a data directory in use exits
// 1 at once, naming the directory and the holder; the first keeps serving,
// and what it acked survives its restart (issue 12, blocker 1: two servers
// on one directory acked posts at the same sequences and lost them).
func TestRun_serveSameDataDir(t *testing.T) {
	data := t.TempDir()
	first := startServe(t, data)
	t.Cleanup(first.stop)
	nats := []string{"--nats", first.url}
	code, out, errOut := runCLI(t, t.Context(), append([]string{"post", "t1", "one", "--wait"}, nats...)...)
	if code != exitOK || !strings.Contains(out, "echo: one") {
		t.Fatalf("post to the first serve: exit %d\n%s%s", code, out, errOut)
	}

	// Bounded: without the lock the second serve would run, not exit.
	sctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	code, out, errOut = runCLI(t, sctx, "serve", "--data", data, "--listen", "127.0.0.1:0", "--no-sync", "--log-level", "warn")
	if code != exitFail {
		t.Fatalf("second serve on %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", data, code, exitFail, out, errOut)
	}
	for _, want := range []string{data, "in use", fmt.Sprintf("pid %d", os.Getpid())} {
		if !strings.Contains(errOut, want) {
			t.Errorf("second serve's error lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(out, "NATS listening") {
		t.Errorf("second serve started a server:\n%s", out)
	}

	code, out, errOut = runCLI(t, t.Context(), append([]string{"post", "t1", "two", "--wait"}, nats...)...)
	if code != exitOK || !strings.Contains(out, "echo: two") {
		t.Fatalf("post to the first serve after the refused second: exit %d\n%s%s", code, out, errOut)
	}
	first.stop()

	again := startServe(t, data)
	t.Cleanup(again.stop)
	code, out, _ = runCLI(t, t.Context(), "show", "t1", "--json", "--nats", again.url)
	var v threadView
	if err := json.Unmarshal([]byte(out), &v); code != exitOK || err != nil {
		t.Fatalf("show after restart: exit %d, %v:\n%s", code, err, out)
	}
	if len(v.Messages) != 2 || len(v.Runs) != 2 || v.Runs[0].Output != "echo: one" || v.Runs[1].Output != "echo: two" {
		t.Errorf("after restart the thread lost acked work:\n%s", out)
	}
	if len(v.Anomalies) != 0 {
		t.Errorf("anomalies after restart: %+v", v.Anomalies)
	}
}

// TestRun_servePortTaken: serve on a port another listener holds exits 1
// at once, naming the address, and opens nothing in its data directory.
func TestRun_servePortTaken(t *testing.T) {
	t.Setenv(envNATS, "")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	data := filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	code, out, errOut := runCLI(t, ctx, "serve", "--data", data, "--listen", addr, "--no-sync", "--log-level", "warn")
	if code != exitFail {
		t.Fatalf("serve on a taken port: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFail, out, errOut)
	}
	if !strings.Contains(errOut, addr) || !strings.Contains(errOut, "in use") {
		t.Errorf("error does not name the address %s:\n%s", addr, errOut)
	}
	if _, err := os.Stat(filepath.Join(data, "jetstream")); !os.IsNotExist(err) {
		t.Errorf("serve opened the store before checking the port: %v", err)
	}
}

// TestRun_postTextSources: post reads long texts from stdin ("-") and from
// --file; reposting an id with another text is a conflict, exit 1.
func TestRun_postTextSources(t *testing.T) {
	url, _ := serveInProcess(t)
	ctx := t.Context()
	// Above the ~128 KiB that one command-line argument may hold.
	long := strings.Repeat("0123456789abcdef", 300<<10/16)
	var out, errOut testkit.SyncBuffer
	code := runIO(ctx, []string{"post", "t1", "-", "--id", "long", "--nats", url, "--wait"}, strings.NewReader(long+"\n"), &out, &errOut)
	if code != exitOK || !strings.Contains(out.String(), "echo: "+long+"\n") {
		t.Fatalf("post - with %d bytes: exit %d; stderr:\n%s", len(long), code, errOut.String())
	}
	file := filepath.Join(t.TempDir(), "prompt.txt")
	if err := os.WriteFile(file, []byte("from a file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, ctx, "post", "t1", "--file", file, "--nats", url, "--wait")
	if code != exitOK || !strings.Contains(stdout, "echo: from a file\n") {
		t.Fatalf("post --file: exit %d\n%s%s", code, stdout, stderr)
	}

	code, stdout, _ = runCLI(t, ctx, "post", "t1", "--file", file, "--id", "f1", "--nats", url)
	if code != exitOK {
		t.Fatalf("post --id f1: exit %d", code)
	}
	code, stdout, _ = runCLI(t, ctx, "post", "t1", "--file", file, "--id", "f1", "--nats", url)
	if code != exitOK || !strings.Contains(stdout, "duplicate") {
		t.Errorf("same repost: exit %d, %q; want duplicate", code, stdout)
	}
	code, stdout, stderr = runCLI(t, ctx, "post", "t1", "other text", "--id", "f1", "--nats", url)
	if code != exitFail || !strings.Contains(stderr, "conflict") || !strings.Contains(stderr, `"f1"`) {
		t.Errorf("repost of f1 with another text: exit %d, want %d\n%s%s", code, exitFail, stdout, stderr)
	}

	if err := os.WriteFile(file, []byte{0xff, 0xfe, 0}, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, ctx, "post", "t1", "--file", file, "--nats", url)
	if code != exitFail || !strings.Contains(stderr, "not valid UTF-8") {
		t.Errorf("post of a binary file: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runCLI(t, ctx, "post", "t1", "--file", filepath.Join(t.TempDir(), "missing"), "--nats", url)
	if code != exitFail || !strings.Contains(stderr, "missing") {
		t.Errorf("post of a missing file: exit %d\n%s", code, stderr)
	}
}

// TestRun_tourAskAnswer: the README tour's ask/answer step, run as pasted
// (each command to its end before the next), many times: post --wait of
// the ask returns once the run asks, so the answer is always posted after
// the request is open and always answers it (issue 12: with the ask in the
// background, the answer sometimes became a new prompt).
func TestRun_tourAskAnswer(t *testing.T) {
	url, _ := serveInProcess(t)
	ctx := t.Context()
	post := func(thread, text, want string) {
		t.Helper()
		code, out, errOut := runCLI(t, ctx, "post", thread, text, "--wait", "--nats", url)
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("post %s %q --wait: exit %d, want output %q\nstdout:\n%s\nstderr:\n%s", thread, text, code, want, out, errOut)
		}
	}
	for i := range 10 {
		thread := "t1" // one thread, as the tour, then fresh ones
		if i%2 == 1 {
			thread = fmt.Sprintf("tour-%d", i)
		}
		post(thread, "hello", "echo: hello")
		post(thread, "ask: what is your name?", "asks: what is your name?")
		post(thread, "Ada", "echo: what is your name? -> Ada")
	}
	code, out, _ := runCLI(t, ctx, "audit", "--nats", url)
	if code != exitOK || !strings.Contains(out, "audit OK") {
		t.Errorf("audit: exit %d\n%s", code, out)
	}
}
