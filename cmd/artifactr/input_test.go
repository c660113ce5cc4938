package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
)

// lastSeq is the thread's last sequence as show --json reports it; 0 when
// show finds no events.
func lastSeq(t *testing.T, url, thread string) uint64 {
	t.Helper()
	code, out, _ := runCLI(t, t.Context(), "show", thread, "--json", "--nats", url)
	if code != exitOK {
		return 0
	}
	var v threadView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("show %s --json: %v\n%s", thread, err, out)
	}
	return v.LastSeq
}

// streamLast is the stream's last sequence.
func streamLast(t *testing.T, url string) uint64 {
	t.Helper()
	code, out, errOut := runCLI(t, t.Context(), "projections", "status", "--json", "--nats", url)
	var l struct {
		StreamLastSeq uint64 `json:"stream_last_seq"`
	}
	if err := json.Unmarshal([]byte(out), &l); code != exitOK || err != nil {
		t.Fatalf("projections status: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	return l.StreamLastSeq
}

// TestRun_emptyMessage: an empty or blank message is refused with exit 2
// and nothing is written, from TEXT, stdin or --file (issue 22, item 4:
// it started a run on nothing).
func TestRun_emptyMessage(t *testing.T) {
	url, _ := serveInProcess(t)
	empty := filepath.Join(t.TempDir(), "empty.txt")
	if err := os.WriteFile(empty, []byte("\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		stdin string
	}{
		{[]string{"post", "t1", ""}, ""},
		{[]string{"post", "t1", "  \t "}, ""},
		{[]string{"post", "t1", "-"}, ""},
		{[]string{"post", "t1", "-", "--wait"}, "\n"},
		{[]string{"post", "t1", "--file", empty}, ""},
	} {
		var out, errOut testkit.SyncBuffer
		code := runIO(t.Context(), append(tc.args, "--nats", url), strings.NewReader(tc.stdin), &out, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), "empty") || out.String() != "" {
			t.Errorf("%q: exit %d, want %d saying it is empty\nstdout:\n%s\nstderr:\n%s", tc.args, code, exitUsage, out.String(), errOut.String())
		}
	}
	if code, _, errOut := runCLI(t, t.Context(), "show", "t1", "--nats", url); code != exitFail || !strings.Contains(errOut, "has no events") {
		t.Errorf("after the refused posts, show t1: exit %d, want no events:\n%s", code, errOut)
	}
}

// TestRun_badNATSURL: a --nats that is no URL is a usage error, exit 2,
// not an unreachable server.
func TestRun_badNATSURL(t *testing.T) {
	for _, u := range []string{"garbage url", "http://127.0.0.1:4222", "nats://", "nats://h:port", ",", "nats://127.0.0.1:4222/x"} {
		for _, args := range [][]string{{"post", "t1", "hi"}, {"threads"}, {"serve"}} {
			code, _, stderr := runCLI(t, t.Context(), append(args, "--nats", u, "--timeout", "1s")...)
			if code != exitUsage || !strings.Contains(stderr, "--nats") || strings.Contains(stderr, "cannot reach") {
				t.Errorf("%v --nats %q: exit %d, want %d:\n%s", args, u, code, exitUsage, stderr)
			}
		}
	}
	// Several URLs, and host:port alone, are fine (nats.go reads them).
	for _, u := range []string{"127.0.0.1:1", "nats://127.0.0.1:1, tls://127.0.0.1:2"} {
		if code, _, stderr := runCLI(t, t.Context(), "threads", "--nats", u, "--timeout", "1s"); code != exitFail {
			t.Errorf("--nats %q: exit %d, want %d (unreachable):\n%s", u, code, exitFail, stderr)
		}
	}
}

// TestRun_serveValidatesFirst: serve checks every flag, and that its
// addresses are free, before it writes anything: no data directory, lock
// file or nkey seeds are left by a refused start (issue 22, item 4:
// --listen nonsense wrote three seeds; a taken port left the directory and
// its lock).
func TestRun_serveValidatesFirst(t *testing.T) {
	t.Setenv(envNATS, "")
	t.Setenv(envNATSURL, "")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"listen nonsense", []string{"--listen", "nonsense"}, exitUsage, "--listen"},
		{"listen nonsense auth", []string{"--listen", "nonsense", "--auth"}, exitUsage, "--listen"},
		{"listen bad port", []string{"--listen", "127.0.0.1:99999", "--auth"}, exitUsage, "--listen"},
		{"listen taken", []string{"--listen", taken.Addr().String(), "--auth"}, exitFail, "in use"},
		{"metrics nonsense", []string{"--metrics", "nope", "--auth"}, exitUsage, "--metrics"},
		{"metrics taken", []string{"--metrics", taken.Addr().String(), "--auth"}, exitFail, "--metrics"},
		{"runner id", []string{"--runner-id", "a b", "--auth"}, exitUsage, "--runner-id"},
		{"work queue", []string{"--work-queue", "a.b", "--auth"}, exitUsage, "--work-queue"},
		{"summaries bucket", []string{"--summaries-bucket", "x y", "--auth"}, exitUsage, "--summaries-bucket"},
		{"stream", []string{"--stream", "a.b", "--auth"}, exitUsage, "--stream"},
		{"tls files", []string{"--tls-cert", "missing.pem", "--tls-key", "missing-key.pem", "--auth"}, exitUsage, "--tls-cert"},
		{"claim ttl", []string{"--claim-ttl", "1ms", "--auth"}, exitUsage, "--claim-ttl"},
		{"exec timeout", []string{"--exec-timeout", "-1s", "--auth"}, exitUsage, "--exec-timeout"},
		{"exec cancel grace", []string{"--exec-cancel-grace", "0s", "--auth"}, exitUsage, "--exec-cancel-grace"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			args := append([]string{"serve", "--data", data, "--no-sync", "--log-level", "warn"}, tc.args...)
			if !strings.Contains(strings.Join(tc.args, " "), "--listen") {
				args = append(args, "--listen", "127.0.0.1:0")
			}
			code, out, stderr := runCLI(t, t.Context(), args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", code, tc.code, tc.want, out, stderr)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("serve wrote %s before refusing: %v", data, err)
			}
		})
	}
	code, _, stderr := runCLI(t, t.Context(), "serve", "--data", file, "--listen", "127.0.0.1:0")
	if code != exitUsage || !strings.Contains(stderr, "not a directory") {
		t.Errorf("serve --data FILE: exit %d:\n%s", code, stderr)
	}
}

// TestRun_cancelRefusals: cancel of a thread with no events, or with no
// active run, or of a run that is not the active one, exits 1, says so and
// writes nothing; a cancel of the active run goes through.
func TestRun_cancelRefusals(t *testing.T) {
	url, _ := serveInProcess(t)
	nats := []string{"--nats", url}
	if code, _, errOut := runCLI(t, t.Context(), append([]string{"post", "t1", "hello", "--wait"}, nats...)...); code != exitOK {
		t.Fatalf("post: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, t.Context(), append([]string{"post", "t2", "ask: name?", "--wait"}, nats...)...); code != exitOK {
		t.Fatalf("post ask: exit %d: %s", code, errOut)
	}
	before := streamLast(t, url)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cancel", "nosuch"}, "thread nosuch has no events"},
		{[]string{"cancel", "t1"}, "thread t1 has no active run"},
		{[]string{"cancel", "t1", "--run", "run-1-2"}, "is not active in thread t1"},
		{[]string{"cancel", "t2", "--run", "run-nope"}, "run run-nope is not active in thread t2"},
		{[]string{"cancel", "nosuch", "--json"}, "has no events"},
	} {
		code, out, errOut := runCLI(t, t.Context(), append(tc.args, nats...)...)
		if code != exitFail || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "nothing written") || out != "" {
			t.Errorf("%v: exit %d, want %d saying %q\nstdout:\n%s\nstderr:\n%s", tc.args, code, exitFail, tc.want, out, errOut)
		}
	}
	if after := streamLast(t, url); after != before {
		t.Errorf("the refused cancels wrote: the stream's last sequence went from %d to %d", before, after)
	}
	if code, _, errOut := runCLI(t, t.Context(), append([]string{"cancel", "t2"}, nats...)...); code != exitOK {
		t.Errorf("cancel of t2's active run: exit %d: %s", code, errOut)
	}
}

// TestRun_showAtRange: show --at outside the stream, or before the
// thread's first event, exits 1 as show of a thread with no events does.
func TestRun_showAtRange(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	url := srv.ClientURL()
	for _, th := range []string{"t0", "t1"} {
		if code, _, errOut := runCLI(t, t.Context(), "post", th, "hi", "--nats", url); code != exitOK {
			t.Fatalf("post: exit %d: %s", code, errOut)
		}
	}
	last := lastSeq(t, url, "t1")
	for _, tc := range []struct {
		at   string
		code int
		want string
	}{
		{"0", exitFail, "start at 1"},
		{"99999", exitFail, "past the stream's last sequence, " + strconv.FormatUint(last, 10)},
		{"2999-01-01T00:00:00Z", exitFail, "in the future"},
		{"1", exitFail, "has no events at or before 1"},
		{strconv.FormatUint(last, 10), exitOK, ""},
	} {
		for _, json := range []bool{false, true} {
			args := []string{"show", "t1", "--at", tc.at, "--nats", url}
			if json {
				args = append(args, "--json")
			}
			code, out, errOut := runCLI(t, t.Context(), args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("%v: exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", args, code, tc.code, tc.want, out, errOut)
			}
		}
	}
}

// TestRun_forkNamesSequences: a fork at a sequence that is another
// thread's event names the source's own events around it, not a range
// that seems to hold it.
func TestRun_forkNamesSequences(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	url := srv.ClientURL()
	for _, th := range []string{"t1", "t2", "t1"} {
		if code, _, errOut := runCLI(t, t.Context(), "post", th, "hi", "--nats", url); code != exitOK {
			t.Fatalf("post: exit %d: %s", code, errOut)
		}
	}
	// Posts only, so t1 is at 1 and 3, t2 at 2.
	code, _, errOut := runCLI(t, t.Context(), "fork", "t1", "--at", "2", "t3", "--nats", url)
	if code != exitFail || !strings.Contains(errOut, "2 is not an event of t1: its nearest events are at 1 and 3") {
		t.Errorf("fork at t2's event: exit %d:\n%s", code, errOut)
	}
	if strings.Contains(errOut, "client:") {
		t.Errorf("the error carries package prefixes:\n%s", errOut)
	}
	code, _, errOut = runCLI(t, t.Context(), "fork", "t1", "--at", "9", "t3", "--nats", url)
	if code != exitFail || !strings.Contains(errOut, "its last event is at 3") {
		t.Errorf("fork past t1's last: exit %d:\n%s", code, errOut)
	}
}

// TestRun_streamMistyped: post --stream NOPE on a server whose stream is
// ARTIFACTR says there is no such stream, not a JetStream API error; and
// an unreachable server's error names the URL once.
func TestRun_streamMistyped(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	url := srv.ClientURL()
	if code, _, errOut := runCLI(t, t.Context(), "post", "t1", "hi", "--nats", url); code != exitOK {
		t.Fatalf("post: exit %d: %s", code, errOut)
	}
	for _, args := range [][]string{{"post", "t1", "hi"}, {"cancel", "t1"}, {"init"}} {
		code, _, errOut := runCLI(t, t.Context(), append(args, "--stream", "NOPE", "--nats", url)...)
		if code != exitFail || !strings.Contains(errOut, "no artifactr stream NOPE at "+url) || strings.Contains(errOut, "10065") {
			t.Errorf("%v --stream NOPE: exit %d:\n%s", args, code, errOut)
		}
		if n := strings.Count(errOut, url); n != 1 {
			t.Errorf("%v --stream NOPE: the URL appears %d times:\n%s", args, n, errOut)
		}
	}
	closed := closedURL(t)
	for _, args := range [][]string{{"post", "t1", "hi"}, {"show", "t1"}, {"threads"}} {
		_, _, errOut := runCLI(t, t.Context(), append(args, "--nats", closed, "--timeout", "1s")...)
		if n := strings.Count(errOut, closed); n != 1 {
			t.Errorf("%v, unreachable: the URL appears %d times:\n%s", args, n, errOut)
		}
	}
}

// TestWithoutPackages: an error chain is told without its packages'
// prefixes, once each level has said what it did.
func TestWithoutPackages(t *testing.T) {
	for in, want := range map[string]string{
		`client: post to t1: events: append conflict: message id "a" was posted before`:         `post to t1: append conflict: message id "a" was posted before`,
		"gave up waiting after 1s: client: wait for message 6 of t1: context deadline exceeded": "gave up waiting after 1s: wait for message 6 of t1: context deadline exceeded",
		"natsembed: listen address in use: client address 127.0.0.1:1 is taken":                 "listen address in use: client address 127.0.0.1:1 is taken",
		"thread t1 has no events": "thread t1 has no events",
	} {
		if got := withoutPackages(in); got != want {
			t.Errorf("withoutPackages(%q)\n = %q\nwant %q", in, got, want)
		}
	}
}
