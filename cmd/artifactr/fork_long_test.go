package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/projections"
)

// postMany posts n messages to thread from 8 writers (posts carry no
// check, so their order does not matter) and returns the last sequence.
func postMany(t *testing.T, s *natsstore.Store, thread string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				id := fmt.Sprintf("m%d", i)
				if _, err := s.Post(t.Context(), thread, &eventspb.MessagePosted{MessageId: id, Text: "message " + id + " of a thread too long to copy into one event"}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestRun_forkLongThread: a fork of a 20,000-message thread is not refused
// (it copies nothing), and show, audit and audit --spec of the fork read
// the source up to the fork's sequence: 20,000 messages of history, none
// pending, a clean audit. A fork of the fork has the same history and its
// own message after it; a run of a fork that takes a message of the
// history is I1 for both audits. A thread_forked of the old copied form
// still shows and audits as before.
// Spec: I1_ConsumedAtMostOnce.
func TestRun_forkLongThread(t *testing.T) {
	const n = 20_000
	url, store := specServer(t)
	ctx := t.Context()
	nats := []string{"--nats", url}
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, ctx, append(args, append(nats, "--timeout", "2m")...)...)
	}
	postMany(t, store, "big", n)
	at, err := events.ThreadLastSeq(ctx, store, "big")
	if err != nil {
		t.Fatal(err)
	}
	atArg := strconv.FormatUint(at, 10)
	// big's snapshot, as its runner's release leaves one: the fork reads
	// it and no more. The commands get a long --timeout: -race on a loaded
	// machine decodes 20,000 messages slowly, and show and the audit read
	// the whole log.
	slow, err := natsstore.New(ctx, natsstore.Config{URL: url, Timeout: 2 * time.Minute}) // a whole thread's read
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	envs, err := slow.Load(ctx, "big", 1)
	if err != nil {
		t.Fatal(err)
	}
	data, err := projections.Fold("big", envs).EncodeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.SaveSnapshot(ctx, "big", data); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli("fork", "big", "--at", atArg, "f1")
	if code != exitOK || !strings.Contains(errOut, "20000 messages and 0 runs of history") {
		t.Fatalf("fork: exit %d\n%s%s", code, out, errOut)
	}
	own, err := store.Post(ctx, "f1", &eventspb.MessagePosted{MessageId: "own", Text: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := events.AcquireClaim(ctx, store, "f1", "h1", time.Minute, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, store, events.NewRunStarted(c, time.Unix(0, 0), "r1", own.Seq, "echo"), events.Fenced(c))

	showJSON := func(thread string) threadView {
		t.Helper()
		// --all: the forks have 20,001 messages, more than show's
		// default --last, and this checks every one of them.
		code, out, errOut := cli("show", thread, "--json", "--all")
		var v threadView
		if err := json.Unmarshal([]byte(out), &v); code != exitOK || err != nil {
			t.Fatalf("show %s --json: exit %d, %v\n%s", thread, code, err, errOut)
		}
		return v
	}
	v := showJSON("f1")
	if v.Fork == nil || v.Fork.Source != "big" || v.Fork.SourceSeq != at || len(v.Messages) != n+1 || len(v.Anomalies) != 0 {
		t.Fatalf("show f1: fork %+v, %d messages, anomalies %+v", v.Fork, len(v.Messages), v.Anomalies)
	}
	for _, m := range v.Messages[:n] {
		if m.Consumed == nil || m.Consumed.Kind != "forked" {
			t.Fatalf("history message %d: consumed %+v", m.Seq, m.Consumed)
		}
	}
	if m := v.Messages[n]; m.Seq != own.Seq || m.Consumed == nil || m.Consumed.RunID != "r1" {
		t.Errorf("f1's own message %+v", m)
	}
	for _, args := range [][]string{{"audit", "--thread", "f1"}, {"audit", "--spec", "--thread", "f1"}, {"audit", "--spec"}} {
		if code, out, errOut := cli(args...); code != exitOK {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}

	// A fork of the fork, at its run's start.
	runSeq, err := store.LastSeq(ctx, "f1", events.KindRun)
	if err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cli("fork", "f1", "--at", strconv.FormatUint(runSeq, 10), "f2"); code != exitOK {
		t.Fatalf("fork of the fork: exit %d\n%s%s", code, out, errOut)
	}
	v = showJSON("f2")
	if len(v.Messages) != n+1 || len(v.Runs) != 1 || v.Runs[0].Status != "abandoned" || v.ActiveRun != nil || len(v.Anomalies) != 0 {
		t.Errorf("show f2: %d messages, runs %+v, anomalies %+v", len(v.Messages), v.Runs, v.Anomalies)
	}

	// A run of a fork that takes a message of its history: I1.
	if code, out, errOut := cli("fork", "big", "--at", atArg, "f3"); code != exitOK {
		t.Fatalf("fork f3: exit %d\n%s%s", code, out, errOut)
	}
	c3, _, err := events.AcquireClaim(ctx, store, "f3", "h3", time.Minute, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, store, events.NewRunStarted(c3, time.Unix(0, 0), "bad", v.Messages[7].Seq, "echo"), events.Fenced(c3))
	if code, out, _ := cli("audit", "--thread", "f3"); code != exitFail || !strings.Contains(out, "I1") {
		t.Errorf("audit of the forged run: exit %d\n%s", code, out)
	}
	if code, out, _ := cli("audit", "--spec", "--thread", "f3"); code != exitFail || !strings.Contains(out, "do not conform") || !strings.Contains(out, "I1_ConsumedAtMostOnce") {
		t.Errorf("audit --spec of the forged run: exit %d\n%s", code, out)
	}

	// The copied form, as forks were written before: a small source.
	for _, id := range []string{"a", "b"} {
		if _, err := store.Post(ctx, "small", &eventspb.MessagePosted{MessageId: id, Text: id}); err != nil {
			t.Fatal(err)
		}
	}
	envs, err = store.Load(ctx, "small", 1)
	if err != nil {
		t.Fatal(err)
	}
	src := projections.Fold("small", envs)
	mustAppend(t, store, events.NewThreadForked("old", time.Unix(0, 0), projections.ForkBody(src, src.LastSeq)), events.ExpectLast(0))
	v = showJSON("old")
	if v.Fork == nil || v.Fork.Source != "small" || len(v.Messages) != 2 || v.Messages[1].Consumed == nil || v.Messages[1].Consumed.Kind != "forked" {
		t.Errorf("show old: %+v", v)
	}
	for _, args := range [][]string{{"audit", "--thread", "old"}, {"audit", "--spec", "--thread", "old"}} {
		if code, out, errOut := cli(args...); code != exitOK {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
}
