package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/artifactr/artifactr/internal/testkit"
)

// TestLogHandler_short: text lines are "TIME LEVEL MSG k=v ...", with the
// logger's attributes and groups; protoactor's info lines are left out,
// its warnings kept, and kept all at debug.
func TestLogHandler_short(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(newLogHandler(&b, "text", slog.LevelInfo))
	log.With("runner", "r1").Info("run ended", "thread", "t1", "reason", "two words")
	log.Info("hello")
	log.WithGroup("g").Warn("grouped", "k", 1)
	pa := log.With("lib", "protoactor")
	pa.Info("actor system started", "id", "x")
	pa.Warn("dead letter")
	log.Debug("not shown")
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	want := []string{
		`^\d\d:\d\d:\d\d\.\d{3} INFO run ended runner=r1 thread=t1 reason="two words"$`,
		`^\d\d:\d\d:\d\d\.\d{3} INFO hello$`,
		`^\d\d:\d\d:\d\d\.\d{3} WARN grouped g\.k=1$`,
		`^\d\d:\d\d:\d\d\.\d{3} WARN dead letter lib=protoactor$`,
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), b.String())
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d: %q does not match %s", i, lines[i], re)
		}
	}

	b.Reset()
	log = slog.New(newLogHandler(&b, "text", slog.LevelDebug))
	log.With("lib", "protoactor").Info("actor system started")
	if !strings.Contains(b.String(), "actor system started") {
		t.Errorf("at debug, protoactor's info is hidden:\n%s", b.String())
	}

	b.Reset()
	log = slog.New(newLogHandler(&b, "json", slog.LevelInfo))
	log.With("runner", "r1").Info("run ended", "thread", "t1")
	log.With("lib", "protoactor").Info("actor system started")
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil || rec["msg"] != "run ended" || rec["thread"] != "t1" || rec["level"] != "INFO" {
		t.Errorf("json: %v %v:\n%s", rec, err, b.String())
	}
}

// TestRun_serveLogs: serve's log on stderr is short lines by default, JSON
// lines with --log-format json, and never protoactor's start-up notice.
func TestRun_serveLogs(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			s := startServe(t, t.TempDir(), "--log-level", "info", "--log-format", format)
			t.Cleanup(s.stop)
			if code, out, errOut := runCLI(t, t.Context(), "post", "t1", "hello", "--wait", "--nats", s.url); code != exitOK {
				t.Fatalf("post: exit %d\n%s%s", code, out, errOut)
			}
			testkit.CheckFor(t, 10*time.Second, func() error {
				if !strings.Contains(s.errOut.String(), "run ended") {
					return errNotYet("no run ended line:\n" + s.errOut.String())
				}
				return nil
			})
			log := s.errOut.String()
			if strings.Contains(log, "actor system started") {
				t.Errorf("protoactor's notice is in the log:\n%s", log)
			}
			for _, line := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
				if format == "json" {
					var rec map[string]any
					if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["msg"] == nil {
						t.Errorf("not a JSON log line: %q (%v)", line, err)
					}
					continue
				}
				if !regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3} (DEBUG|INFO|WARN|ERROR) `).MatchString(line) || strings.Contains(line, "time=") {
					t.Errorf("not a short log line: %q", line)
				}
				if strings.Contains(line, "run ended") && len(line) > 120 {
					t.Errorf("a %d-character run ended line: %q", len(line), line)
				}
			}
		})
	}
	code, _, errOut := runCLI(t, t.Context(), "threads", "--log-format", "xml")
	if code != exitUsage || !strings.Contains(errOut, "--log-format") {
		t.Errorf("--log-format xml: exit %d:\n%s", code, errOut)
	}
}

type errNotYet string

func (e errNotYet) Error() string { return string(e) }

// TestWriteSummaries_longIDs: a table row stays narrow for 128-character
// ids; the ids keep both ends.
func TestWriteSummaries_longIDs(t *testing.T) {
	long := "support-" + strings.Repeat("x", 112) + "-ticket1"
	holder := strings.Repeat("r", 100) + "/ab12cd"
	var b bytes.Buffer
	sums := []threadSummary{
		{Thread: long, Status: statusActive, Holder: holder, LeaseLive: true, ActiveRun: "run-12345678901234567890-12345678901234567890"},
		{Thread: "t1", Status: statusIdle},
	}
	if err := writeSummaries(&b, sums); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if n := len([]rune(line)); n > 3*maxIDWidth+64 {
			t.Errorf("a %d-character row: %q", n, line)
		}
	}
	out := b.String()
	for _, want := range []string{"support-", "-ticket1", "…", "/ab12cd"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if got := shortID(long); len([]rune(got)) != maxIDWidth {
		t.Errorf("shortID: %d characters, want %d", len([]rune(got)), maxIDWidth)
	}
	if got := shortID("t1"); got != "t1" {
		t.Errorf("shortID(t1) = %q", got)
	}
}

// TestServe_secondSignalStopsRunner: after a second signal serve stops its
// runner, releasing nothing, before it closes the store: nothing of the
// runner is left to warn that it "cannot follow the stream; retrying", a
// fault that is none (issue 22, item 8).
func TestServe_secondSignalStopsRunner(t *testing.T) {
	t.Setenv(envNATS, "")
	t.Setenv(envNATSURL, "")
	before := goleak.IgnoreCurrent()
	sigs := make(chan os.Signal, 2)
	var out, errOut testkit.SyncBuffer
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, signals: sigs}
	root := a.rootCommand()
	root.SetArgs([]string{"serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--log-level", "warn", "--echo-delay", "1m"})
	root.SetOut(&out)
	root.SetErr(&errOut)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(context.Background()) }()
	testkit.CheckFor(t, 15*time.Second, func() error {
		if !strings.Contains(out.String(), " ready on stream ") {
			return errNotYet("not ready:\n" + out.String() + errOut.String())
		}
		return nil
	})
	url := listenRE.FindStringSubmatch(out.String())[1]
	if code, _, e := runCLI(t, t.Context(), "post", "t1", "hold on", "--nats", url); code != exitOK {
		t.Fatalf("post: exit %d: %s", code, e)
	}
	testkit.CheckFor(t, 15*time.Second, func() error {
		code, o, _ := runCLI(t, t.Context(), "threads", "--json", "--nats", url)
		if code != exitOK || !strings.Contains(o, `"status": "active"`) {
			return errNotYet("no active run yet:\n" + o)
		}
		return nil
	})
	sigs <- syscall.SIGTERM
	testkit.CheckFor(t, 10*time.Second, func() error {
		if !strings.Contains(out.String(), "draining") {
			return errNotYet("not draining:\n" + out.String())
		}
		return nil
	})
	sigs <- syscall.SIGTERM
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "without releasing claims") {
			t.Errorf("serve after a second signal: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit after a second signal")
	}
	// Nothing of the runner (follow, lease watch, actors) outlives serve.
	// Retried: goroutines that are ending may still be on their way out.
	if err := testkit.Poll(15*time.Second, func() error { return goleak.Find(before) }); err != nil {
		t.Errorf("serve left goroutines running after a second signal:\n%v", err)
	}
	if strings.Contains(errOut.String(), "WARN") {
		t.Errorf("warnings after a deliberate stop:\n%s", errOut.String())
	}
}

// TestRun_serveJSON: serve --json prints its status lines as JSON objects,
// one per line.
func TestRun_serveJSON(t *testing.T) {
	t.Setenv(envNATS, "")
	t.Setenv(envNATSURL, "")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut testkit.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--json", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--no-sync", "--log-level", "warn"}, &out, &errOut)
	}()
	testkit.CheckFor(t, 15*time.Second, func() error {
		if !strings.Contains(out.String(), " ready on stream ") {
			return errNotYet("not ready:\n" + out.String() + errOut.String())
		}
		return nil
	})
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("serve: exit %d\n%s", code, errOut.String())
	}
	var msgs []string
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var v statusJSON
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil || v.Time.IsZero() || v.Msg == "" {
			t.Errorf("not a status object: %q (%v)", line, err)
		}
		msgs = append(msgs, v.Msg)
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"NATS listening on nats://", "ready on stream", "stopped:"} {
		if !strings.Contains(all, want) {
			t.Errorf("no status line with %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(all, "artifactr serve:") {
		t.Errorf("the prefix stayed:\n%s", all)
	}
}
