package main

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// TestRun_fork: fork a served thread after its first run, then show and
// audit both threads: the new thread shows the copied history, its own run
// answers a new message, the source is unchanged, and audit and audit
// --spec are clean. A retried fork is a duplicate; forks onto a thread
// with events, or of a sequence that is not the source's, are refused.
func TestRun_fork(t *testing.T) {
	url, _ := serveInProcess(t, "--claim-ttl", "2s")
	ctx := t.Context()
	nats := []string{"--nats", url}
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, ctx, append(args, nats...)...)
	}
	for _, text := range []string{"hello", "ask: your name?", "Ada", "later"} {
		if code, out, errOut := cli("post", "t1", text, "--wait"); code != exitOK {
			t.Fatalf("post %q: exit %d\n%s%s", text, code, out, errOut)
		}
	}
	code, out, _ := cli("show", "t1", "--json")
	var t1 threadView
	if err := json.Unmarshal([]byte(out), &t1); code != exitOK || err != nil || len(t1.Runs) != 3 {
		t.Fatalf("show t1 --json: exit %d, %v\n%s", code, err, out)
	}
	at := t1.Runs[1].EndSeq // after the answered question, before "later"
	atArg := strconv.FormatUint(at, 10)

	code, out, errOut := cli("fork", "t1", "--at", atArg, "t2")
	if code != exitOK || !strings.Contains(errOut, "t2 forked from t1 at "+atArg+": 3 messages and 2 runs of history, by reference") {
		t.Fatalf("fork: exit %d\n%s%s", code, out, errOut)
	}
	forkSeq := strings.TrimSpace(out)
	if code, out, _ := cli("fork", "t1", "--at", atArg, "t2"); code != exitOK || strings.TrimSpace(out) != forkSeq+" duplicate" {
		t.Errorf("fork again: exit %d, %q; want %q", code, out, forkSeq+" duplicate")
	}
	if code, out, errOut := cli("post", "t2", "bonjour", "--wait"); code != exitOK || !strings.Contains(out, "echo: bonjour") {
		t.Fatalf("post t2: exit %d\n%s%s", code, out, errOut)
	}

	code, out, _ = cli("show", "t2")
	for _, want := range []string{
		"forked:     from t1 at " + atArg + " (thread_forked at " + forkSeq + ")",
		`"hello"  -> history, copied by the fork at ` + forkSeq,
		`"Ada"  -> history, copied by the fork at ` + forkSeq,
		`"bonjour"  -> prompt of`,
		"completed: prompt 1, claim 0, holder , seqs copied by the fork at " + forkSeq,
		`result:  "echo: your name? -> Ada"`,
		`result:  "echo: bonjour"`,
	} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("show t2 lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "later") || strings.Contains(out, "anomalies") {
		t.Errorf("show t2 shows t1's later message or anomalies:\n%s", out)
	}
	code, out, _ = cli("show", "t2", "--json")
	var t2 threadView
	if err := json.Unmarshal([]byte(out), &t2); code != exitOK || err != nil {
		t.Fatalf("show t2 --json: exit %d, %v\n%s", code, err, out)
	}
	if t2.Fork == nil || t2.Fork.Source != "t1" || t2.Fork.SourceSeq != at || len(t2.Messages) != 4 || len(t2.Runs) != 3 ||
		t2.Messages[3].Text != "bonjour" || t2.Messages[0].Consumed == nil || t2.Messages[0].Consumed.Kind != "forked" {
		t.Errorf("show t2 --json: %+v", t2)
	}
	// show --at before the fork: t2 did not exist yet, as for a thread
	// with no events at all, exit 1.
	if code, _, errOut := cli("show", "t2", "--at", atArg); code != exitFail || !strings.Contains(errOut, "has no events at or before") {
		t.Errorf("show t2 --at %s: exit %d\n%s", atArg, code, errOut)
	}
	// t1 is unchanged by the fork.
	code, out, _ = cli("show", "t1", "--json")
	var after threadView
	if err := json.Unmarshal([]byte(out), &after); code != exitOK || err != nil || after.Fork != nil || len(after.Messages) != 4 || len(after.Anomalies) != 0 {
		t.Errorf("show t1 after the fork: %v\n%s", err, out)
	}

	for _, args := range [][]string{{"audit"}, {"audit", "--thread", "t1"}, {"audit", "--thread", "t2"}} {
		if code, out, errOut := cli(args...); code != exitOK || !strings.Contains(out, "audit OK") || !strings.Contains(out, "0 violations, 0 anomalies") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	if code, out, errOut := cli("audit", "--spec"); code != exitOK || !strings.Contains(out, "spec OK:") {
		t.Errorf("audit --spec: exit %d\n%s%s", code, out, errOut)
	}
	// Refusals: nothing is written, exit 1 for the work, 2 for usage.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"fork", "t1", "--at", atArg, "t2"}, exitOK, "duplicate"},
		{[]string{"fork", "t1", "--at", "1", "t2"}, exitFail, "already has events"},
		{[]string{"fork", "t2", "--at", "1", "t3"}, exitFail, "is not an event of t2"},
		{[]string{"fork", "nope", "--at", "1", "t3"}, exitFail, "has no events"},
		{[]string{"fork", "t1", "t3"}, exitUsage, `required flag(s) "at" not set`},
		{[]string{"fork", "t1", "--at", "x", "t3"}, exitUsage, `--at "x"`},
		{[]string{"fork", "t1", "--at", "1", "t 3"}, exitUsage, "invalid thread id"},
		{[]string{"fork", "t1", "--at", "1", "t1"}, exitUsage, "into itself"},
		{[]string{"fork", "t1", "--at", "1"}, exitUsage, "accepts 2 arg(s)"},
	} {
		code, out, errOut := cli(tc.args...)
		if code != tc.code || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q\n%s%s", tc.args, code, tc.code, tc.want, out, errOut)
		}
	}
	if code, out, _ := cli("show", "t3"); code != exitFail {
		t.Errorf("a refused fork wrote t3:\n%s", out)
	}
}

// TestFormatEvent_threadForked: watch shows a fork's source, sequence and
// what it copied.
func TestFormatEvent_threadForked(t *testing.T) {
	ev := events.NewThreadForked("t2", time.Unix(0, 0), &eventspb.ThreadForked{
		SourceThread: "t1", SourceSeq: 9,
		Messages: []*eventspb.ForkedMessage{{Seq: 1}, {Seq: 4}},
		Runs:     []*eventspb.ForkedRun{{RunId: "r"}},
	})
	env := events.Envelope{Seq: 12, Thread: "t2", Type: events.TypeThreadForked, Event: ev}
	if got, want := formatEvent(env), " 12 t2 thread_forked source=t1 at=9 messages=2 runs=1"; !strings.HasSuffix(got, want) {
		t.Errorf("formatEvent: %q, want it to end with %q", got, want)
	}
	if j := toJSON(env); !strings.Contains(string(j.Body), `"source_thread":"t1"`) {
		t.Errorf("toJSON body: %s", j.Body)
	}
}

func TestRun_forkHelp(t *testing.T) {
	code, stdout, _ := runCLI(t, t.Context(), "fork", "--help")
	for _, want := range []string{"Usage:", "--at", "history", "already has events"} {
		if code != exitOK || !strings.Contains(stdout, want) {
			t.Errorf("fork --help: exit %d, lacks %q", code, want)
		}
	}
}

// TestRun_forkAsClient: forking needs only the client role's permissions
// (it writes the new thread's posted subject and reads), and the auditor,
// which writes nothing, cannot fork.
func TestRun_forkAsClient(t *testing.T) {
	data := t.TempDir()
	url, _, _ := startServeArgs(t, "--auth", "--data", data, "--listen", "127.0.0.1:0", "--claim-ttl", "2s")
	auth := filepath.Join(data, "auth")
	client := []string{"--nats", url, "--nkey", filepath.Join(auth, "client.nk")}
	auditor := []string{"--nats", url, "--nkey", filepath.Join(auth, "auditor.nk")}
	ctx := t.Context()
	if code, out, errOut := runCLI(t, ctx, append([]string{"post", "t1", "hello", "--wait"}, client...)...); code != exitOK {
		t.Fatalf("post: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runCLI(t, ctx, append([]string{"fork", "t1", "--at", "1", "t2"}, auditor...)...)
	if code != exitFail || !strings.Contains(errOut, "permission") {
		t.Errorf("fork as auditor: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, ctx, append([]string{"fork", "t1", "--at", "1", "t2"}, client...)...); code != exitOK {
		t.Fatalf("fork as client: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, ctx, append([]string{"post", "t2", "again", "--wait"}, client...)...); code != exitOK || !strings.Contains(out, "echo: again") {
		t.Errorf("post to the fork: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, ctx, append([]string{"audit", "--spec"}, auditor...)...); code != exitOK {
		t.Errorf("audit --spec: exit %d\n%s%s", code, out, errOut)
	}
}
