package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
)

// TestRun_strategiesAndCancel drives configure, post --strategy and cancel
// against an in-process serve whose runs last until cancelled.
func TestRun_strategiesAndCancel(t *testing.T) {
	url, _ := serveInProcess(t, "--echo-delay", "1h", "--shutdown-grace", "100ms")
	ctx := t.Context()
	nats := []string{"--nats", url}
	cli := func(want int, args ...string) (string, string) {
		t.Helper()
		code, out, errOut := runCLI(t, ctx, append(args, nats...)...)
		if code != want {
			t.Fatalf("%v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, want, out, errOut)
		}
		return out, errOut
	}
	s, err := natsstore.New(ctx, natsstore.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	view := func() *projections.Thread {
		envs, err := s.Load(ctx, "t1", 1)
		if err != nil {
			t.Fatal(err)
		}
		return projections.Fold("t1", envs)
	}
	waitRun := func(what string, ok func(v *projections.Thread) bool) {
		t.Helper()
		testkit.CheckFor(t, 20*time.Second, func() error {
			if !ok(view()) {
				return errors.New("waiting for " + what)
			}
			return nil
		})
	}

	cli(exitOK, "configure", "t1", "--strategy", "reject")
	cli(exitOK, "post", "t1", "a")
	waitRun("a's run", func(v *projections.Thread) bool { return v.ActiveRun != nil })
	_, errOut := cli(exitFail, "post", "t1", "b")
	if !strings.Contains(errOut, "thread busy") {
		t.Errorf("reject while busy: stderr %q, want thread busy", errOut)
	}
	if n := len(view().Messages); n != 1 {
		t.Errorf("%d messages, want 1: the refused post was written", n)
	}
	// A post that names interrupt overrides the thread's reject.
	cli(exitOK, "post", "t1", "c", "--strategy", "interrupt")
	waitRun("a interrupted, c's run", func(v *projections.Thread) bool {
		return len(v.Runs) == 2 && v.Runs[0].Reason == events.ReasonInterrupted && v.ActiveRun != nil
	})
	cli(exitOK, "cancel", "t1")
	waitRun("c cancelled", func(v *projections.Thread) bool {
		return v.ActiveRun == nil && v.Runs[1].Reason == events.ReasonCancelled
	})
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, out, _ := runCLI(t, wctx, append([]string{"watch", "t1", "--from", "all"}, nats...)...)
	for _, want := range []string{"strategy=reject", "strategy=interrupt", "run_interrupted", "cancel_requested"} {
		if !strings.Contains(out, want) {
			t.Errorf("watch does not show %q:\n%s", want, out)
		}
	}
	show, _ := cli(exitOK, "show", "t1")
	for _, want := range []string{"strategy:   reject", "interrupted by message 6", "cancel:  requested at"} {
		if !strings.Contains(show, want) {
			t.Errorf("show does not say %q:\n%s", want, show)
		}
	}
	if out, _ := cli(exitOK, "audit", "--spec"); !strings.Contains(out, "audit OK") {
		t.Errorf("audit --spec:\n%s", out)
	}
}

func TestRun_strategyUsageErrors(t *testing.T) {
	t.Setenv(envNATS, closedURL(t))
	for _, args := range [][]string{
		{"post", "t1", "x", "--strategy", "shout"},
		{"configure", "t1"},
		{"configure", "t1", "--strategy", "shout"},
		{"cancel"},
		{"cancel", "t1", "--id", "a:b"},
	} {
		if code, _, errOut := runCLI(t, t.Context(), args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (usage); stderr %q", args, code, exitUsage, errOut)
		}
	}
}

// Cancel requests and thread_configured go on the posted subject, so the
// client role may write them and the auditor role may not.
func TestRun_serveAuth_cancelAsClient(t *testing.T) {
	data := t.TempDir()
	url, _, _ := startServeArgs(t, "--auth", "--data", data, "--listen", "127.0.0.1:0", "--claim-ttl", "2s",
		"--echo-delay", "1h", "--shutdown-grace", "100ms")
	ctx := t.Context()
	auth := filepath.Join(data, "auth")
	client := []string{"--nats", url, "--nkey", filepath.Join(auth, "client.nk")}
	auditor := []string{"--nats", url, "--nkey", filepath.Join(auth, "auditor.nk"), "--timeout", "2s"}
	run := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, ctx, args...)
		if code != want {
			t.Fatalf("%v: exit %d, want %d\n%s\n%s", args, code, want, out, errOut)
		}
		return errOut
	}
	run(exitOK, append([]string{"configure", "t1", "--strategy", "interrupt"}, client...)...)
	run(exitOK, append([]string{"post", "t1", "a"}, client...)...)
	testkit.CheckFor(t, 20*time.Second, func() error {
		_, out, _ := runCLI(t, ctx, append([]string{"show", "t1", "--json"}, client...)...)
		var v threadView
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			return err
		}
		if len(v.Runs) != 1 || v.Runs[0].Status != "active" {
			return fmt.Errorf("no active run yet: %s", out)
		}
		return nil
	})
	errOut := run(exitFail, append([]string{"cancel", "t1"}, auditor...)...)
	if !strings.Contains(errOut, "permission denied") || !strings.Contains(errOut, "threads.t1.posted") {
		t.Errorf("cancel as auditor: stderr:\n%s", errOut)
	}
	run(exitOK, append([]string{"cancel", "t1"}, client...)...)
	testkit.CheckFor(t, 20*time.Second, func() error {
		_, out, _ := runCLI(t, ctx, append([]string{"show", "t1", "--json"}, client...)...)
		var v threadView
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			return err
		}
		if len(v.Runs) != 1 || v.Runs[0].Status != "failed" || v.Runs[0].Reason != events.ReasonCancelled {
			return fmt.Errorf("run not cancelled yet: %s", out)
		}
		return nil
	})
}
