package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/projections"
)

// writeLongThread writes turns turns (a post, its run's start, an output
// and its end), the runner's compact snapshot, 5 more turns, then an
// active run with an output and an open request, and a pending message.
func writeLongThread(t *testing.T, store *natsstore.Store, thread string, turns int) {
	t.Helper()
	ctx, now := t.Context(), time.Unix(1000, 0)
	c, _, err := events.AcquireClaim(ctx, store, thread, "r/a", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	post := func(text string) uint64 {
		t.Helper()
		ack, err := store.Post(ctx, thread, &eventspb.MessagePosted{Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return ack.Seq
	}
	onRun := func(ev *eventspb.Event) {
		t.Helper()
		last, err := store.LastSeq(ctx, thread, events.KindRun)
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, store, ev, events.ExpectLast(last))
	}
	turn := func(i int) {
		m := post(fmt.Sprintf("message %d", i))
		run := fmt.Sprintf("run-%d", i)
		mustAppend(t, store, events.NewRunStarted(c, now, run, m, "echo"), events.Fenced(c))
		onRun(events.NewRunOutput(c, now, run, fmt.Sprintf("output %d", i)))
		onRun(events.NewRunCompleted(c, now, run, fmt.Sprintf("echo: message %d", i)))
	}
	for i := range turns {
		turn(i)
	}
	envs, err := store.Load(ctx, thread, 1)
	if err != nil {
		t.Fatal(err)
	}
	snap := projections.Fold(thread, envs)
	snap.Compact() // as a runner keeps it
	data, err := snap.EncodeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.SaveSnapshot(ctx, thread, data); err != nil {
		t.Fatal(err)
	}
	for i := turns; i < turns+5; i++ {
		turn(i)
	}
	m := post("the last prompt")
	mustAppend(t, store, events.NewRunStarted(c, now, "run-last", m, "echo"), events.Fenced(c))
	onRun(events.NewRunOutput(c, now, "run-last", "thinking"))
	onRun(events.NewRequestOpened(c, now, "run-last", "q1", "which one?"))
	post("pending one")
}

// showSections splits show's text into its state lines (claim, active
// run, open requests and the like), its message lines and its run lines.
func showSections(out string) (state, messages, runs []string) {
	part := &state
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		switch {
		case l == "messages:":
			part = &messages
			continue
		case l == "runs:":
			part = &runs
			continue
		case !strings.HasPrefix(l, " "):
			part = &state
		}
		*part = append(*part, l)
	}
	return state, messages, runs
}

// TestRun_showLast: on a thread of more than --last messages, show prints
// its newest N messages, the runs started since, and how many older ones
// it left out; its state lines (claim, active run, open requests) are
// those of --all, and its message and run lines are --all's last ones.
// --all prints what a whole fold prints. --json says what it left out.
func TestRun_showLast(t *testing.T) {
	const turns = 120
	url, store := specServer(t)
	ctx := t.Context()
	writeLongThread(t, store, "long", turns)
	cli := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, ctx, append(args, "--nats", url)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}
	envs, err := store.Load(ctx, "long", 1)
	if err != nil {
		t.Fatal(err)
	}
	whole := projections.Fold("long", envs)
	var want strings.Builder
	if err := writeShow(&want, whole); err != nil {
		t.Fatal(err)
	}
	all := cli("show", "long", "--all")
	if all != want.String() {
		t.Errorf("show --all differs from the whole fold's show:\n%s\nwant:\n%s", all, want.String())
	}
	total := len(whole.Messages) // turns+5 turns, the last prompt and the pending one

	allState, allMsgs, allRuns := showSections(all)
	for _, n := range []int{defaultShowLast, 7} {
		args := []string{"show", "long"}
		if n != defaultShowLast {
			args = append(args, "--last", fmt.Sprint(n))
		}
		out := cli(args...)
		state, msgs, runs := showSections(out)
		from := whole.Messages[total-n].Seq
		omitted := fmt.Sprintf("omitted:    %d older messages before seq %d and the runs started before it", total-n, from)
		if len(state) < 2 || state[0] != fmt.Sprintf("thread long: %d messages, last seq %d, last activity %s", total, whole.LastSeq, whole.LastActivity.Local().Format(time.RFC3339)) || !strings.HasPrefix(state[1], omitted) {
			t.Errorf("--last %d: head\n%s\nwant %d messages and %q", n, strings.Join(state, "\n"), total, omitted)
		}
		if len(state) < 3 || state[2] != fmt.Sprintf("pending:    1 message, the oldest at seq %d", whole.Pending()[0].Seq) {
			t.Errorf("--last %d: no pending line:\n%s", n, strings.Join(state, "\n"))
		}
		if got, want := strings.Join(state[3:], "\n"), strings.Join(allState[1:], "\n"); got != want {
			t.Errorf("--last %d: state lines\n%s\nwant --all's\n%s", n, got, want)
		}
		if len(msgs) != n || strings.Join(msgs, "\n") != strings.Join(allMsgs[len(allMsgs)-n:], "\n") {
			t.Errorf("--last %d: %d message lines, want --all's last %d:\n%s", n, len(msgs), n, strings.Join(msgs, "\n"))
		}
		if !strings.HasSuffix(strings.Join(allRuns, "\n"), strings.Join(runs, "\n")) || len(runs) == 0 {
			t.Errorf("--last %d: run lines are not --all's last ones:\n%s", n, strings.Join(runs, "\n"))
		}
		if !strings.Contains(out, "run-last active") || !strings.Contains(out, "q1 of run-last: \"which one?\"") {
			t.Errorf("--last %d: no active run-last or its open request:\n%s", n, out)
		}
	}

	var v threadView
	if err := json.Unmarshal([]byte(cli("show", "long", "--json")), &v); err != nil {
		t.Fatal(err)
	}
	if v.OmittedMessages != total-defaultShowLast || v.OmittedBefore != whole.Messages[total-defaultShowLast].Seq || len(v.Messages) != defaultShowLast ||
		v.ActiveRun == nil || *v.ActiveRun != "run-last" || len(v.OpenRequests) != 1 || len(v.Pending) != 1 || v.Pending[0] != whole.Pending()[0].Seq {
		t.Errorf("--json: omitted %d before %d, %d messages, active %v, open %d, pending %v", v.OmittedMessages, v.OmittedBefore, len(v.Messages), v.ActiveRun, len(v.OpenRequests), v.Pending)
	}
	// A thread of no more messages than --last: the same as --all, and
	// --json has no omitted fields.
	if out := cli("show", "long", "--last", fmt.Sprint(total)); out != all {
		t.Errorf("--last %d (every message) differs from --all:\n%s", total, out)
	}
	if out := cli("show", "long", "--last", fmt.Sprint(total), "--json"); strings.Contains(out, "omitted") {
		t.Errorf("--json of every message says omitted:\n%s", out)
	}
	if code, _, errOut := runCLI(t, ctx, "show", "long", "--last", "0", "--nats", url); code != exitUsage || !strings.Contains(errOut, "--last 0") {
		t.Errorf("--last 0: exit %d, %s", code, errOut)
	}
}
