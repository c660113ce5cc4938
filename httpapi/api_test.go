package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/httpapi"
	"github.com/artifactr/artifactr/internal/testkit"
)

// Bad input gets a 4xx with {"detail": ...}, and writes nothing.
func TestServer_badInput(t *testing.T) {
	e := newEnv(t, nil)
	th := e.newThread()
	e.json("POST", "/threads/"+th+"/runs/wait", `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"hi"}]}}`, 200, nil)
	big := `{"metadata":{"x":"` + strings.Repeat("a", 70<<10) + `"}}`
	cases := []struct {
		name, method, path, body, lastEventID string
		want                                  int
	}{
		{"malformed JSON", "POST", "/threads", `{"metadata":`, "", 422},
		{"not an object", "POST", "/threads", `[1]`, "", 422},
		{"unknown field", "POST", "/threads", `{"metadata":{},"colour":"red"}`, "", 422},
		{"trailing data", "POST", "/threads", `{} {}`, "", 422},
		{"bad thread id in body", "POST", "/threads", `{"thread_id":"a b"}`, "", 422},
		{"bad thread id in path", "GET", "/threads/a%20b", "", "", 422},
		{"bad if_exists", "POST", "/threads", `{"if_exists":"sometimes"}`, "", 422},
		{"ttl", "POST", "/threads", `{"ttl":{"ttl":5}}`, "", 422},
		{"oversized body", "POST", "/threads", big, "", 413},
		{"exists", "POST", "/threads", `{"thread_id":"` + th + `","if_exists":"raise"}`, "", 409},
		{"unknown thread", "GET", "/threads/nope", "", "", 404},
		{"unknown route", "GET", "/nowhere", "", "", 404},
		{"unknown assistant", "POST", "/threads/" + th + "/runs", `{"assistant_id":"nobody","input":{"messages":[{"role":"user","content":"x"}]}}`, "", 404},
		{"no assistant", "POST", "/threads/" + th + "/runs", `{"input":{"messages":[{"role":"user","content":"x"}]}}`, "", 422},
		{"run on unknown thread", "POST", "/threads/nope/runs", `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"x"}]}}`, "", 404},
		{"resume without open request", "POST", "/threads/" + th + "/runs/wait", `{"assistant_id":"echo","command":{"resume":"x"}}`, "", 409},
		{"no input", "POST", "/threads/" + th + "/runs", `{"assistant_id":"echo"}`, "", 422},
		{"input without messages", "POST", "/threads/" + th + "/runs", `{"assistant_id":"echo","input":{"topic":"x"}}`, "", 422},
		{"an ai message as input", "POST", "/threads/" + th + "/runs", `{"assistant_id":"echo","input":{"messages":[{"type":"ai","content":"x"}]}}`, "", 422},
		{"unknown message field", "POST", "/threads/" + th + "/runs", `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"x","mood":1}]}}`, "", 422},
		{"bad message id", "POST", "/threads/" + th + "/runs", `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"x","id":"a:b"}]}}`, "", 422},
		{"image content", "POST", "/threads/" + th + "/runs", `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":[{"type":"image_url","image_url":"x"}]}]}}`, "", 422},
		{"bad strategy", "POST", "/threads/" + th + "/runs", `{"assistant_id":"echo","multitask_strategy":"shout","input":{"messages":[{"role":"user","content":"x"}]}}`, "", 422},
		{"bad stream mode", "POST", "/threads/" + th + "/runs/stream", `{"assistant_id":"echo","stream_mode":"telepathy","input":{"messages":[{"role":"user","content":"x"}]}}`, "", 422},
		{"bad checkpoint", "POST", "/threads/" + th + "/runs", `{"assistant_id":"echo","checkpoint_id":"abc","input":{"messages":[{"role":"user","content":"x"}]}}`, "", 422},
		{"checkpoint after the end", "POST", "/threads/" + th + "/runs", `{"assistant_id":"echo","checkpoint_id":"999999","input":{"messages":[{"role":"user","content":"x"}]}}`, "", 404},
		{"bad webhook", "POST", "/threads/" + th + "/runs", `{"assistant_id":"echo","webhook":"ftp://x","input":{"messages":[{"role":"user","content":"x"}]}}`, "", 422},
		{"negative after_seconds", "POST", "/threads/" + th + "/runs", `{"assistant_id":"echo","after_seconds":-1,"input":{"messages":[{"role":"user","content":"x"}]}}`, "", 422},
		{"interrupt_before", "POST", "/threads/" + th + "/runs", `{"assistant_id":"echo","interrupt_before":["agent"],"input":{"messages":[{"role":"user","content":"x"}]}}`, "", 422},
		{"command goto", "POST", "/threads/" + th + "/runs", `{"assistant_id":"echo","command":{"goto":"x"}}`, "", 422},
		{"unknown run", "GET", "/threads/" + th + "/runs/nope", "", "", 404},
		{"cancel unknown run", "POST", "/threads/" + th + "/runs/nope/cancel", "", "", 404},
		{"bad cancel action", "POST", "/threads/" + th + "/runs/nope/cancel?action=explode", "", "", 422},
		{"bad state checkpoint", "GET", "/threads/" + th + "/state/xyz", "", "", 422},
		{"bad search status", "POST", "/threads/search", `{"status":"sleepy"}`, "", 422},
		{"bad search sort", "POST", "/threads/search", `{"sort_by":"mood"}`, "", 422},
		{"bad limit", "POST", "/threads/search", `{"limit":0}`, "", 422},
		{"assistants are configured", "POST", "/assistants", `{"graph_id":"echo"}`, "", 405},
		{"unknown assistant get", "GET", "/assistants/nobody", "", "", 404},
		{"bad Last-Event-ID", "GET", "/threads/" + th + "/runs/nope/stream", "", "x-y", 422},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := e.lastSeq()
			var hdr []string
			if c.lastEventID != "" {
				hdr = []string{"Last-Event-ID", c.lastEventID}
			}
			code, body := e.do(c.method, c.path, c.body, hdr...)
			if code != c.want {
				t.Fatalf("status %d, want %d: %s", code, c.want, body)
			}
			var d struct {
				Detail string `json:"detail"`
			}
			if err := json.Unmarshal(body, &d); err != nil || d.Detail == "" {
				t.Fatalf("body %s: want {\"detail\": ...}", body)
			}
			if after := e.lastSeq(); after != before {
				t.Fatalf("the stream went from %d to %d: a refused request wrote", before, after)
			}
		})
	}
}

type thread struct {
	ThreadID   string                       `json:"thread_id"`
	Status     string                       `json:"status"`
	Metadata   map[string]any               `json:"metadata"`
	Values     map[string][]json.RawMessage `json:"values"`
	Interrupts map[string][]struct {
		Value string `json:"value"`
	} `json:"interrupts"`
}

type msg struct {
	Type    string `json:"type"`
	Content string `json:"content"`
	ID      string `json:"id"`
}

func messagesOf(t *testing.T, raw []json.RawMessage) []msg {
	t.Helper()
	out := make([]msg, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestServer_threads(t *testing.T) {
	e := newEnv(t, nil)
	var a thread
	e.json("POST", "/threads", `{"thread_id":"t-a","metadata":{"user":"ada","n":1}}`, 200, &a)
	if a.ThreadID != "t-a" || a.Status != "idle" || a.Metadata["user"] != "ada" {
		t.Fatalf("created %+v", a)
	}
	e.json("POST", "/threads", `{"thread_id":"t-a","if_exists":"do_nothing","metadata":{"user":"bob"}}`, 200, &a)
	if a.Metadata["user"] != "ada" {
		t.Fatalf("do_nothing changed the thread: %+v", a)
	}
	e.json("POST", "/threads", `{"thread_id":"t-b","metadata":{"user":"bob"}}`, 200, nil)
	e.json("PATCH", "/threads/t-a", `{"metadata":{"topic":"x"}}`, 200, &a)
	if a.Metadata["user"] != "ada" || a.Metadata["topic"] != "x" {
		t.Fatalf("patch did not merge: %+v", a.Metadata)
	}
	var found []thread
	e.json("POST", "/threads/search", `{"metadata":{"user":"ada"}}`, 200, &found)
	if len(found) != 1 || found[0].ThreadID != "t-a" {
		t.Fatalf("search by metadata: %+v", found)
	}
	e.json("POST", "/threads/search", `{"limit":1,"offset":0,"sort_by":"created_at","sort_order":"desc"}`, 200, &found)
	if len(found) != 1 || found[0].ThreadID != "t-b" {
		t.Fatalf("newest first, one per page: %+v", found)
	}
	e.json("POST", "/threads/search", `{"limit":1,"offset":1,"sort_by":"created_at","sort_order":"desc"}`, 200, &found)
	if len(found) != 1 || found[0].ThreadID != "t-a" {
		t.Fatalf("second page: %+v", found)
	}
	var n int
	e.json("POST", "/threads/count", `{"status":"idle"}`, 200, &n)
	if n != 2 {
		t.Fatalf("count idle = %d, want 2", n)
	}
	e.json("POST", "/threads/t-a/runs/wait", `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"hello"}]}}`, 200, nil)
	var cp thread
	e.json("POST", "/threads/t-a/copy", "", 200, &cp)
	if cp.ThreadID == "t-a" || len(cp.Values["messages"]) != 2 || cp.Metadata["topic"] != "x" {
		t.Fatalf("copy %+v", cp)
	}
	if code, _ := e.do("DELETE", "/threads/t-a", ""); code != 204 {
		t.Fatalf("delete: %d", code)
	}
	for _, p := range []string{"/threads/t-a", "/threads/t-a/state", "/threads/t-a/runs"} {
		if code, body := e.do("GET", p, ""); code != 404 {
			t.Fatalf("GET %s after delete: %d %s", p, code, body)
		}
	}
	e.json("POST", "/threads/count", `{}`, 200, &n)
	if n != 2 { // t-b and the copy
		t.Fatalf("count after delete = %d, want 2", n)
	}
	if code, _ := e.do("POST", "/threads", `{"thread_id":"t-a"}`); code != 409 {
		t.Fatalf("re-creating a deleted thread: %d, want 409", code)
	}
}

type state struct {
	Values     map[string][]json.RawMessage `json:"values"`
	Next       []string                     `json:"next"`
	Checkpoint struct {
		CheckpointID string `json:"checkpoint_id"`
	} `json:"checkpoint"`
	Tasks []struct {
		Interrupts []struct {
			Value string `json:"value"`
		} `json:"interrupts"`
	} `json:"tasks"`
}

func TestServer_runsInterruptHistory(t *testing.T) {
	e := newEnv(t, nil)
	th := e.newThread()
	var out map[string]json.RawMessage
	e.json("POST", "/threads/"+th+"/runs/wait", `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"hello","id":"m-1"}]}}`, 200, &out)
	var ms []json.RawMessage
	_ = json.Unmarshal(out["messages"], &ms)
	got := messagesOf(t, ms)
	if len(got) != 2 || got[0].Type != "human" || got[0].ID != "m-1" || got[1].Type != "ai" || got[1].Content != "echo: hello" {
		t.Fatalf("wait: %s", out["messages"])
	}
	// A retry with the same message id is the same run: nothing new.
	before := e.lastSeq()
	var run struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
	}
	e.json("POST", "/threads/"+th+"/runs", `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"hello","id":"m-1"}]}}`, 200, &run)
	if run.RunID != "m-1" || run.Status != "success" || e.lastSeq() != before {
		t.Fatalf("retried create: %+v, stream %d -> %d", run, before, e.lastSeq())
	}
	e.json("POST", "/threads/"+th+"/runs/wait", `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"ask: name?"}]}}`, 200, &out)
	if !strings.Contains(string(out["__interrupt__"]), `"value":"name?"`) {
		t.Fatalf("wait on an ask: %s", out["__interrupt__"])
	}
	var tj thread
	e.json("GET", "/threads/"+th, "", 200, &tj)
	if tj.Status != "interrupted" || len(tj.Interrupts) != 1 {
		t.Fatalf("thread %+v", tj)
	}
	var st state
	e.json("GET", "/threads/"+th+"/state", "", 200, &st)
	if len(st.Tasks) != 1 || st.Tasks[0].Interrupts[0].Value != "name?" || len(st.Next) != 1 {
		t.Fatalf("state while interrupted: %+v", st)
	}
	e.json("POST", "/threads/"+th+"/runs/wait", `{"assistant_id":"echo","command":{"resume":"Ada"}}`, 200, &out)
	if !strings.Contains(string(out["messages"]), `"echo: name? -\u003e Ada"`) && !strings.Contains(string(out["messages"]), `echo: name? -> Ada`) {
		t.Fatalf("resume: %s", out["messages"])
	}
	var hist []state
	e.json("POST", "/threads/"+th+"/history", `{"limit":10}`, 200, &hist)
	e.json("GET", "/threads/"+th+"/state", "", 200, &st)
	if len(hist) == 0 || hist[0].Checkpoint.CheckpointID != st.Checkpoint.CheckpointID || len(hist[0].Values["messages"]) != len(st.Values["messages"]) {
		t.Fatalf("history[0] is not the current state: %+v vs %+v", hist[0].Checkpoint, st.Checkpoint)
	}
	var first *state
	for i := range hist {
		if len(hist[i].Values["messages"]) == 2 {
			first = &hist[i]
		}
	}
	if first == nil {
		t.Fatalf("no state holds exactly the first exchange: %d states", len(hist))
	}
	// A run from that checkpoint forks: its thread sees only hello, then again.
	e.json("POST", "/threads/"+th+"/runs/wait", fmt.Sprintf(`{"assistant_id":"echo","checkpoint_id":%q,"input":{"messages":[{"role":"user","content":"again"}]}}`, first.Checkpoint.CheckpointID), 200, &out)
	_ = json.Unmarshal(out["messages"], &ms)
	got = messagesOf(t, ms)
	if len(got) != 4 || got[0].Content != "hello" || got[2].Content != "again" || got[3].Content != "echo: again" {
		t.Fatalf("run from checkpoint: %+v", got)
	}
	var runs []struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
	}
	e.json("GET", "/threads/"+th+"/runs?limit=10", "", 200, &runs)
	if len(runs) != 3 || runs[2].RunID != "m-1" {
		t.Fatalf("runs %+v", runs)
	}
	for _, r := range runs {
		if r.Status != "success" {
			t.Fatalf("run %+v", r)
		}
	}
}

// Reject refuses a run while one is active, writing nothing; a cancel
// ends the active run as interrupted.
func TestServer_rejectAndCancel(t *testing.T) {
	e := newEnv(t, nil)
	th := e.newThread()
	var run struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
	}
	// hold keeps the run active until the cancel below, however loaded the
	// machine: a 400 ms run could end before the reject post.
	e.json("POST", "/threads/"+th+"/runs", `{"assistant_id":"hold","input":{"messages":[{"role":"user","content":"long"}]}}`, 200, &run)
	testkit.WaitFor(t, 10*time.Second, "the run to start", func() (bool, string) {
		var r struct{ Status string }
		e.json("GET", "/threads/"+th+"/runs/"+run.RunID, "", 200, &r)
		return r.Status == "running", r.Status
	})
	code, body := e.do("POST", "/threads/"+th+"/runs", `{"assistant_id":"echo","multitask_strategy":"reject","input":{"messages":[{"role":"user","content":"again"}]}}`)
	if code != 409 || !strings.Contains(string(body), "detail") {
		t.Fatalf("reject while busy: %d %s", code, body)
	}
	// Nothing written: the run's own events go on, but no post landed.
	var runs []json.RawMessage
	e.json("GET", "/threads/"+th+"/runs", "", 200, &runs)
	if len(runs) != 1 {
		t.Fatalf("after a refused post the thread has %d runs, want 1", len(runs))
	}
	if code, body := e.do("POST", "/threads/"+th+"/runs/"+run.RunID+"/cancel?wait=1&action=interrupt", ""); code != 204 {
		t.Fatalf("cancel: %d %s", code, body)
	}
	var r struct{ Status string }
	e.json("GET", "/threads/"+th+"/runs/"+run.RunID, "", 200, &r)
	if r.Status != "interrupted" {
		t.Fatalf("cancelled run is %s", r.Status)
	}
	var tj thread
	e.json("GET", "/threads/"+th, "", 200, &tj)
	if tj.Status != "idle" {
		t.Fatalf("thread after cancel: %s", tj.Status)
	}
}

// Tokens: none or a wrong one is 401, the auditor's may only read.
func TestServer_auth(t *testing.T) {
	e := newEnv(t, map[string]httpapi.Role{"client-token-0123456789abcdef0123456789": httpapi.RoleClient, "auditor-token-0123456789abcdef012345678": httpapi.RoleAuditor})
	cases := []struct {
		name, method, path, body string
		hdr                      []string
		want                     int
	}{
		{"no token", "GET", "/threads/x", "", nil, 401},
		{"wrong token", "GET", "/threads/x", "", []string{"Authorization", "Bearer nope"}, 401},
		{"not bearer", "GET", "/threads/x", "", []string{"Authorization", "Basic abc"}, 401},
		{"client creates", "POST", "/threads", `{"thread_id":"t1"}`, []string{"Authorization", "Bearer client-token-0123456789abcdef0123456789"}, 200},
		{"x-api-key", "GET", "/threads/t1", "", []string{"X-Api-Key", "client-token-0123456789abcdef0123456789"}, 200},
		{"auditor reads", "GET", "/threads/t1", "", []string{"Authorization", "Bearer auditor-token-0123456789abcdef012345678"}, 200},
		{"auditor searches", "POST", "/threads/search", `{}`, []string{"Authorization", "Bearer auditor-token-0123456789abcdef012345678"}, 200},
		{"auditor writes", "POST", "/threads", `{}`, []string{"Authorization", "Bearer auditor-token-0123456789abcdef012345678"}, 403},
		{"auditor runs", "POST", "/threads/t1/runs", `{}`, []string{"Authorization", "Bearer auditor-token-0123456789abcdef012345678"}, 403},
		{"auditor deletes", "DELETE", "/threads/t1", ``, []string{"Authorization", "Bearer auditor-token-0123456789abcdef012345678"}, 403},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := e.lastSeq()
			code, body := e.do(c.method, c.path, c.body, c.hdr...)
			if code != c.want {
				t.Fatalf("status %d, want %d: %s", code, c.want, body)
			}
			if code >= 400 {
				var d struct{ Detail string }
				if json.Unmarshal(body, &d) != nil || d.Detail == "" {
					t.Fatalf("body %s", body)
				}
				if e.lastSeq() != before {
					t.Fatal("a refused request wrote")
				}
			}
		})
	}
}

var _ = http.MethodGet

// A cancel with rollback leaves the run's prompt out of the state; a post
// with the rollback strategy does the same to the run it interrupts.
func TestServer_rollback(t *testing.T) {
	e := newEnv(t, nil)
	th := e.newThread()
	e.json("POST", "/threads/"+th+"/runs/wait", `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"kept"}]}}`, 200, nil)
	running := func(id string) {
		testkit.WaitFor(t, 10*time.Second, "run "+id+" to start", func() (bool, string) {
			var r struct{ Status string }
			e.json("GET", "/threads/"+th+"/runs/"+id, "", 200, &r)
			return r.Status == "running", r.Status
		})
	}
	// hold keeps each run active until it is cancelled or interrupted, so
	// that neither ends on its own first, however loaded the machine.
	e.json("POST", "/threads/"+th+"/runs", `{"assistant_id":"hold","input":{"messages":[{"role":"user","content":"dropped","id":"rb1"}]}}`, 200, nil)
	running("rb1")
	if code, body := e.do("POST", "/threads/"+th+"/runs/rb1/cancel?wait=1&action=rollback", ""); code != 204 {
		t.Fatalf("cancel rollback: %d %s", code, body)
	}
	e.json("POST", "/threads/"+th+"/runs", `{"assistant_id":"hold","input":{"messages":[{"role":"user","content":"dropped too","id":"rb2"}]}}`, 200, nil)
	running("rb2")
	var out map[string][]json.RawMessage
	e.json("POST", "/threads/"+th+"/runs/wait", `{"assistant_id":"echo","multitask_strategy":"rollback","input":{"messages":[{"role":"user","content":"last"}]}}`, 200, &out)
	var texts []string
	for _, m := range messagesOf(t, out["messages"]) {
		texts = append(texts, m.Content)
	}
	if got := strings.Join(texts, "|"); got != "kept|echo: kept|last|echo: last" {
		t.Fatalf("state after rollbacks: %s", got)
	}
	for _, id := range []string{"rb1", "rb2"} {
		var r struct{ Status string }
		e.json("GET", "/threads/"+th+"/runs/"+id, "", 200, &r)
		if r.Status != "interrupted" {
			t.Fatalf("run %s is %s", id, r.Status)
		}
	}
}
