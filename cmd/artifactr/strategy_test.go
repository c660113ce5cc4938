package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"artifactr/events"
	"artifactr/events/natsstore"
	"artifactr/internal/testkit"
	"artifactr/projections"
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
