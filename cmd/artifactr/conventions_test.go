package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// decodeJSON parses out as one JSON document into v, failing t if it is not
// exactly one.
func decodeJSON(t *testing.T, what, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", what, err, out)
	}
	if dec.More() {
		t.Fatalf("%s: more than one JSON document:\n%s", what, out)
	}
}

// TestRun_versionFlag: --version prints version's line; version --json
// one object (issue 22, item 3).
func TestRun_versionFlag(t *testing.T) {
	code, flagOut, _ := runCLI(t, t.Context(), "--version")
	_, cmdOut, _ := runCLI(t, t.Context(), "version")
	if code != exitOK || !strings.HasPrefix(flagOut, "artifactr ") || flagOut != cmdOut {
		t.Errorf("--version: exit %d, %q; version prints %q", code, flagOut, cmdOut)
	}
	code, out, _ := runCLI(t, t.Context(), "version", "--json")
	var v versionJSON
	decodeJSON(t, "version --json", out, &v)
	if code != exitOK || v.Version == "" || v.Schema == "" || !strings.HasPrefix(v.Go, "go") {
		t.Errorf("version --json: exit %d, %+v", code, v)
	}
}

// TestRun_completion: cobra's completion command is on for bash, zsh and
// fish.
func TestRun_completion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, errOut := runCLI(t, t.Context(), "completion", sh)
		if code != exitOK || !strings.Contains(out, "artifactr") || len(out) < 500 {
			t.Errorf("completion %s: exit %d, %d bytes; stderr:\n%s", sh, code, len(out), errOut)
		}
	}
}

// TestRun_natsURLEnv: --nats wins, then ARTIFACTR_NATS, then NATS_URL.
func TestRun_natsURLEnv(t *testing.T) {
	flagURL, artURL, natsURL := closedURL(t), closedURL(t), closedURL(t)
	cases := []struct {
		name      string
		art, nats string
		args      []string
		want      string
	}{
		{"NATS_URL alone", "", natsURL, nil, natsURL},
		{"ARTIFACTR_NATS first", artURL, natsURL, nil, artURL},
		{"--nats first", artURL, natsURL, []string{"--nats", flagURL}, flagURL},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envNATS, tc.art)
			t.Setenv(envNATSURL, tc.nats)
			code, _, stderr := runCLI(t, t.Context(), append([]string{"threads", "--timeout", "1s"}, tc.args...)...)
			if code != exitFail || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, want %d naming %s:\n%s", code, exitFail, tc.want, stderr)
			}
		})
	}
}

// TestRun_flagNames: the read model's bucket is --summaries-bucket on every
// command; --bucket still works, hidden, and says so.
func TestRun_flagNames(t *testing.T) {
	for _, path := range [][]string{{"threads"}, {"projections", "status"}, {"projections", "rebuild"}, {"serve"}, {"init"}} {
		code, out, _ := runCLI(t, t.Context(), append(path, "--help")...)
		if code != exitOK || !strings.Contains(out, "--summaries-bucket") || strings.Contains(out, "--bucket") {
			t.Errorf("%v --help: exit %d; want --summaries-bucket and no --bucket:\n%s", path, code, out)
		}
	}
	srv := natsembedtest.RunForTest(t)
	url := srv.ClientURL()
	if code, _, errOut := runCLI(t, t.Context(), "post", "t1", "hi", "--nats", url); code != exitOK {
		t.Fatalf("post: exit %d: %s", code, errOut)
	}
	code, out, errOut := runCLI(t, t.Context(), "threads", "--bucket", "thread_summaries", "--nats", url)
	if code != exitOK || !strings.Contains(out, "t1") || !strings.Contains(errOut, "--summaries-bucket") {
		t.Errorf("threads --bucket: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	// configure's --strategy has no default: the help says it is required,
	// and leaving it out is a usage error.
	_, out, _ = runCLI(t, t.Context(), "configure", "--help")
	if !strings.Contains(out, "(required)") || strings.Contains(out, "default: the thread's") {
		t.Errorf("configure --help on --strategy:\n%s", out)
	}
	code, _, errOut = runCLI(t, t.Context(), "configure", "t1", "--nats", url)
	if code != exitUsage || !strings.Contains(errOut, "strategy") {
		t.Errorf("configure without --strategy: exit %d:\n%s", code, errOut)
	}
}

// TestRun_jsonOutputs: the commands that write print one JSON document
// with --json, and keep their exit codes.
func TestRun_jsonOutputs(t *testing.T) {
	url, _ := serveInProcess(t)
	ctx := t.Context()
	cli := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, ctx, append(args, "--json", "--nats", url)...)
		if code != want {
			t.Fatalf("%v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, want, out, errOut)
		}
		return out
	}

	var p postedJSON
	decodeJSON(t, "post", cli(exitOK, "post", "t1", "hello", "--id", "m1"), &p)
	if p.Thread != "t1" || p.Seq == 0 || p.MessageID != "m1" || p.Duplicate || p.Run != nil {
		t.Errorf("post --json: %+v", p)
	}
	var dup postedJSON
	decodeJSON(t, "post again", cli(exitOK, "post", "t1", "hello", "--id", "m1"), &dup)
	if !dup.Duplicate || dup.Seq != p.Seq {
		t.Errorf("post --json of the same id: %+v, want duplicate of %d", dup, p.Seq)
	}

	var w postedJSON
	decodeJSON(t, "post --wait", cli(exitOK, "post", "t1", "again", "--wait"), &w)
	if w.Run == nil || w.Run.Status != "completed" || w.Run.Output != "echo: again" || w.Run.RunID == "" {
		t.Errorf("post --wait --json: %+v", w.Run)
	}
	var f postedJSON
	decodeJSON(t, "post --wait of a failing run", cli(exitFail, "post", "t1", "fail: disk full", "--wait"), &f)
	if f.Run == nil || f.Run.Status != "failed" || !strings.Contains(f.Run.Reason, "disk full") {
		t.Errorf("post --wait --json of a failing run: %+v", f.Run)
	}
	var ask postedJSON
	decodeJSON(t, "post --wait of an ask", cli(exitOK, "post", "t2", "ask: your name?", "--wait"), &ask)
	if ask.Run == nil || ask.Run.Status != "active" || ask.Run.Question != "your name?" || ask.Run.RequestID == "" {
		t.Errorf("post --wait --json of an ask: %+v", ask.Run)
	}

	var c cancelJSON
	decodeJSON(t, "cancel", cli(exitOK, "cancel", "t2", "--id", "c1"), &c)
	if c.Thread != "t2" || c.Seq == 0 || c.RequestID != "c1" {
		t.Errorf("cancel --json: %+v", c)
	}
	var cf configuredJSON
	decodeJSON(t, "configure", cli(exitOK, "configure", "t1", "--strategy", "reject"), &cf)
	if cf.Thread != "t1" || cf.Seq == 0 || cf.Strategy != "reject" {
		t.Errorf("configure --json: %+v", cf)
	}
	var fk forkedJSON
	decodeJSON(t, "fork", cli(exitOK, "fork", "t1", "--at", u(w.Seq), "t1-b"), &fk)
	if fk.Thread != "t1-b" || fk.Source != "t1" || fk.SourceSeq != w.Seq || fk.Seq == 0 || fk.Messages != 2 || fk.Duplicate {
		t.Errorf("fork --json: %+v", fk)
	}
	var in initJSON
	decodeJSON(t, "init", cli(exitOK, "init"), &in)
	if in.Stream != "ARTIFACTR" || in.SummaryBucket != "thread_summaries" || in.Replicas != 1 || in.URL != url {
		t.Errorf("init --json: %+v", in)
	}
	var rb rebuiltJSON
	decodeJSON(t, "projections rebuild", cli(exitOK, "projections", "rebuild", "--force"), &rb)
	if rb.Bucket != "thread_summaries" || rb.Events == 0 || rb.Checkpoint == 0 {
		t.Errorf("projections rebuild --json: %+v", rb)
	}
}

// TestRun_benchDemoJSON: bench turns, bench audit and demo print their
// figures or outcome as one JSON object on stdout with --json, their text
// on stderr.
func TestRun_benchDemoJSON(t *testing.T) {
	code, out, errOut := runCLI(t, t.Context(), "bench", "turns", "--threads", "2", "--messages", "3", "--json")
	var bt benchTurnsJSON
	decodeJSON(t, "bench turns", out, &bt)
	if code != exitOK || bt.Mode != "open" || len(bt.Phases) != 1 || bt.Phases[0].Turns != 6 || bt.Phases[0].TurnsPerSecond <= 0 ||
		bt.RawAppendsPerSec <= 0 || !strings.Contains(errOut, "turns:") {
		t.Errorf("bench turns --json: exit %d, %+v\nstderr:\n%s", code, bt, errOut)
	}
	code, out, errOut = runCLI(t, t.Context(), "bench", "audit", "--events", "3000", "--threads", "20", "--rounds", "1", "--json")
	var ba benchAuditJSON
	decodeJSON(t, "bench audit", out, &ba)
	if code != exitOK || ba.Events != 3000 || ba.Violations != 0 || ba.RawEventsPerSecond <= 0 || !strings.Contains(errOut, "verdict:") {
		t.Errorf("bench audit --json: exit %d, %+v\nstderr:\n%s", code, ba, errOut)
	}
	code, out, errOut = runCLI(t, t.Context(), "demo", "--claim-ttl", "500ms", "--json")
	var d demoJSON
	decodeJSON(t, "demo", out, &d)
	if code != exitOK || !d.OK || !strings.Contains(errOut, "audit OK") {
		t.Errorf("demo --json: exit %d, %+v\nstderr:\n%s", code, d, errOut)
	}
}
