package main

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
)

// runCLI runs the CLI in-process and returns its exit code and outputs.
func runCLI(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut testkit.SyncBuffer
	code := run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// closedURL returns a NATS URL on a loopback port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "nats://" + addr
}

func TestRun_usageErrors(t *testing.T) {
	t.Setenv(envNATS, closedURL(t)) // nothing here may connect anyway
	cases := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"no command", nil, "Usage:"},
		{"unknown command", []string{"frob"}, `unknown command "frob"`},
		{"unknown flag", []string{"post", "--bogus", "t", "x"}, "unknown flag: --bogus"},
		{"post one arg", []string{"post", "t1"}, "post needs the text"},
		{"post three args", []string{"post", "t1", "a", "b"}, "accepts between 1 and 2 arg(s)"},
		{"post text and file", []string{"post", "t1", "a", "--file", "x.txt"}, "not both"},
		{"post bad id", []string{"post", "t1", "a", "--id", "a:b"}, "invalid message id"},
		{"post non-ASCII id", []string{"post", "t1", "a", "--id", "ä"}, "non-ASCII character 'ä'"},
		{"post bad wait timeout", []string{"post", "t1", "x", "--wait-timeout", "0s"}, "--wait-timeout"},
		{"bad duration", []string{"post", "t1", "x", "--timeout", "soon"}, "invalid argument"},
		{"zero timeout", []string{"threads", "--timeout", "0s"}, "--timeout"},
		{"show no thread", []string{"show"}, "accepts 1 arg(s)"},
		{"show bad at", []string{"show", "t1", "--at", "yesterday"}, `--at "yesterday"`},
		{"watch bad from", []string{"watch", "--from", "soon"}, `--from "soon"`},
		{"watch two threads", []string{"watch", "a", "b"}, "accepts at most 1 arg(s)"},
		{"threads arg", []string{"threads", "x"}, `unknown command "x"`},
		{"bad log level", []string{"threads", "--log-level", "loud"}, "--log-level"},
		{"serve bad agent", []string{"serve", "--agent", "magic"}, `--agent "magic"`},
		{"serve exec no program", []string{"serve", "--agent", "exec"}, "needs a program after --"},
		{"serve exec missing program", []string{"serve", "--agent", "exec", "--", "no-such-agent-program-xyz"}, `"no-such-agent-program-xyz" cannot be run`},
		{"serve exec not executable", []string{"serve", "--agent", "exec", "--", "./main.go"}, `"./main.go" cannot be run`},
		{"serve exec directory", []string{"serve", "--agent", "exec", "--", "/"}, `"/" cannot be run`},
		{"serve echo with program", []string{"serve", "--", "python3", "x.py"}, "--agent echo takes no program"},
		{"serve stray arg", []string{"serve", "extra"}, "serve takes no arguments"},
		{"serve replicas embedded", []string{"serve", "--replicas", "3"}, "needs a cluster"},
		{"serve bad guard", []string{"serve", "--guard", "sometimes"}, `--guard "sometimes"`},
		{"serve tiny ttl", []string{"serve", "--claim-ttl", "1ms"}, "--claim-ttl"},
		{"bench no subcommand", []string{"bench"}, "Usage:"},
		{"bench zero threads", []string{"bench", "turns", "--threads", "0"}, "at least 1"},
		{"demo bad ttl", []string{"demo", "--claim-ttl", "1h"}, "--claim-ttl"},
		{"version arg", []string{"version", "x"}, `unknown command "x"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// serve's usage errors must come before it embeds a server, so
			// unset the env that would make it use an external one.
			if strings.HasPrefix(strings.Join(tc.args, " "), "serve") {
				t.Setenv(envNATS, "")
				t.Setenv(envNATSURL, "")
			}
			code, _, stderr := runCLI(t, t.Context(), tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr)
			}
		})
	}
}

func TestRun_badThreadID(t *testing.T) {
	url := closedURL(t) // the id is refused before any connection
	for _, args := range [][]string{
		{"post", "bad id", "hello"},
		{"post", "a.b", "hello", "--wait"},
		{"show", "t*"},
		{"watch", "t>"},
		{"audit", "--thread", strings.Repeat("x", 129)},
		{"show", "café"},
	} {
		t.Run(args[0], func(t *testing.T) {
			code, _, stderr := runCLI(t, t.Context(), append(args, "--nats", url)...)
			if code != exitUsage {
				t.Errorf("%v: exit %d, want %d; stderr:\n%s", args, code, exitUsage, stderr)
			}
			// The error names the rule, and a non-ASCII character as
			// itself, not as a byte.
			for _, want := range []string{"invalid thread id", "[A-Za-z0-9_-]{1,128}"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("%v: stderr lacks %q:\n%s", args, want, stderr)
				}
			}
			if strings.Contains(args[1], "é") && !strings.Contains(stderr, "'é'") {
				t.Errorf("%v: the non-ASCII character is not shown as itself:\n%s", args, stderr)
			}
		})
	}
}

func TestRun_natsUnreachable(t *testing.T) {
	url := closedURL(t)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"post", "t1", "hello"}, exitFail},
		{[]string{"post", "t1", "hello", "--wait"}, exitFail},
		{[]string{"watch"}, exitFail},
		{[]string{"threads"}, exitFail},
		{[]string{"show", "t1"}, exitFail},
		{[]string{"audit"}, exitFail},
		{[]string{"audit", "--thread", "t1"}, exitFail},
		{[]string{"projections", "status"}, exitFail},
		{[]string{"serve", "--runner-id", "r1"}, exitFail},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			start := time.Now()
			code, _, stderr := runCLI(t, t.Context(), append(tc.args, "--nats", url, "--timeout", "2s")...)
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("%v took %s; want it bounded by --timeout", tc.args, d)
			}
			if code != tc.code {
				t.Errorf("%v: exit %d, want %d; stderr:\n%s", tc.args, code, tc.code, stderr)
			}
			for _, want := range []string{url, "artifactr serve", "--nats"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("%v: stderr lacks %q:\n%s", tc.args, want, stderr)
				}
			}
			// One hint, and no usage hint: the command line was fine.
			if n := strings.Count(stderr, "artifactr serve"); n != 1 {
				t.Errorf("%v: the hint appears %d times:\n%s", tc.args, n, stderr)
			}
			if strings.Contains(stderr, "--help") {
				t.Errorf("%v: a usage hint for an unreachable server:\n%s", tc.args, stderr)
			}
		})
	}
}

func TestRun_unreachableFromEnv(t *testing.T) {
	url := closedURL(t)
	t.Setenv(envNATS, url)
	code, _, stderr := runCLI(t, t.Context(), "threads", "--timeout", "1s")
	if code != exitFail || !strings.Contains(stderr, url) {
		t.Fatalf("exit %d, want %d naming %s; stderr:\n%s", code, exitFail, url, stderr)
	}
}

func TestRun_help(t *testing.T) {
	for _, path := range [][]string{
		{}, {"serve"}, {"post"}, {"watch"}, {"threads"}, {"show"}, {"audit"},
		{"demo"}, {"bench"}, {"bench", "turns"}, {"version"}, {"help"},
	} {
		name := strings.Join(path, " ")
		t.Run("/"+name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, t.Context(), append(path, "--help")...)
			if code != exitOK {
				t.Fatalf("exit %d; stderr:\n%s", code, stderr)
			}
			if !strings.Contains(stdout, "Usage:") {
				t.Errorf("no usage in:\n%s", stdout)
			}
		})
	}
	code, stdout, _ := runCLI(t, t.Context(), "help", "post")
	if code != exitOK || !strings.Contains(stdout, "--wait") || !strings.Contains(stdout, "[A-Za-z0-9_-]") {
		t.Errorf("help post: exit %d, want --wait and the id pattern:\n%s", code, stdout)
	}
	// serve's help points to the exec protocol and says what a shutdown
	// does to a run waiting for an answer.
	code, stdout, _ = runCLI(t, t.Context(), "serve", "--help")
	for _, want := range []string{"actors/agent/PROTOCOL.md", "waiting for an answer", "run_failed", "--steer", "--exec-timeout"} {
		if code != exitOK || !strings.Contains(stdout, want) {
			t.Errorf("serve --help: exit %d, lacks %q", code, want)
		}
	}
}

func TestRun_version(t *testing.T) {
	code, stdout, _ := runCLI(t, t.Context(), "version")
	if code != exitOK || !strings.HasPrefix(stdout, "artifactr ") {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
}

// TestRun_demo runs the whole tour: its claim lapse must end with A's
// run_started refused by the fence and a clean audit.
// Spec: StartFenced.
func TestRun_demo(t *testing.T) {
	start := time.Now()
	code, stdout, stderr := runCLI(t, t.Context(), "demo", "--claim-ttl", "1s")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"A took the lease",
		"A's session has lapsed",
		"B took the lapsed lease",
		"B's run_started landed",
		"REFUSED by the fence (ErrThreadBusy): nothing written",
		"answer_given",
		"echo: what is your name? -> Ada",
		"audit OK",
		"0 violations",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("demo took %s", d)
	}
}

// TestRun_readOnlyCreatesNothing: the commands that read never create the
// stream or a bucket: on a server without them they exit 1 saying so, and
// the server has no stream afterwards (issue 12).
func TestRun_readOnlyCreatesNothing(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	url := srv.ClientURL()
	wctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{"show", "t1"},
		{"threads"},
		{"watch"},
		{"watch", "t1", "--from", "all"},
		{"audit"},
		{"audit", "--thread", "t1"},
		{"projections", "status"},
		{"threads", "--stream", "NOPE"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, _, stderr := runCLI(t, wctx, append(args, "--nats", url)...)
			if code != exitFail {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitFail, stderr)
			}
			if !strings.Contains(stderr, "no artifactr stream") || !strings.Contains(stderr, url) {
				t.Errorf("stderr does not say there is no stream at %s:\n%s", url, stderr)
			}
		})
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	names := js.StreamNames(t.Context())
	for n := range names.Name() {
		t.Errorf("a read-only command created stream %s", n)
	}

	// Once set up, --stream NOPE still creates nothing.
	code, _, errOut := runCLI(t, t.Context(), "post", "t1", "hi", "--nats", url)
	if code != exitOK {
		t.Fatalf("post: exit %d: %s", code, errOut)
	}
	code, _, errOut = runCLI(t, t.Context(), "threads", "--stream", "NOPE", "--nats", url)
	if code != exitFail || !strings.Contains(errOut, "no artifactr stream NOPE") {
		t.Errorf("threads --stream NOPE: exit %d:\n%s", code, errOut)
	}
	if _, err := js.Stream(t.Context(), "NOPE"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("threads --stream NOPE created it: %v", err)
	}
}

// TestRun_threadWithNoEvents: show and audit --thread of a thread with no
// events exit 1 saying so: the id is most likely a typo.
func TestRun_threadWithNoEvents(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	url := srv.ClientURL()
	if code, _, errOut := runCLI(t, t.Context(), "post", "t1", "hi", "--nats", url); code != exitOK {
		t.Fatalf("post: exit %d: %s", code, errOut)
	}
	for _, args := range [][]string{
		{"show", "t2"},
		{"show", "t2", "--json"},
		{"audit", "--thread", "t2"},
		{"audit", "--thread", "t1", "--from", "99"},
	} {
		code, stdout, stderr := runCLI(t, t.Context(), append(args, "--nats", url)...)
		if code != exitFail || !strings.Contains(stderr, "has no events") {
			t.Errorf("%v: exit %d, want %d saying the thread has no events; stdout:\n%s\nstderr:\n%s", args, code, exitFail, stdout, stderr)
		}
	}
	for _, args := range [][]string{{"show", "t1"}, {"audit", "--thread", "t1"}} {
		if code, _, stderr := runCLI(t, t.Context(), append(args, "--nats", url)...); code != exitOK {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
		}
	}
}
