package httpapi_test

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/internal/testkit"
)

// idOf parses an SSE id "SEQ-K".
func idOf(t *testing.T, id string) [2]uint64 {
	t.Helper()
	a, b, ok := strings.Cut(id, "-")
	seq, err1 := strconv.ParseUint(a, 10, 64)
	k, err2 := strconv.ParseUint(b, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("SSE id %q: want SEQ-K", id)
	}
	return [2]uint64{seq, k}
}

func less(a, b [2]uint64) bool { return a[0] < b[0] || (a[0] == b[0] && a[1] < b[1]) }

const allModes = `["values","updates","messages-tuple","events"]`

// The stream: metadata first, end last, ids from the stream sequence
// increasing, each mode's events; and a join after any event gives exactly
// the events after it.
func TestServer_streamFraming(t *testing.T) {
	e := newEnv(t, nil)
	th := e.newThread()
	res := e.stream("POST", "/threads/"+th+"/runs/stream", `{"assistant_id":"echo","stream_mode":`+allModes+`,"input":{"messages":[{"role":"user","content":"hello","id":"r1"}]}}`)
	if loc := res.Header.Get("Content-Location"); loc != "/threads/"+th+"/runs/r1" {
		t.Fatalf("Content-Location %q", loc)
	}
	if loc := res.Header.Get("Location"); loc != "/threads/"+th+"/runs/r1/stream" {
		t.Fatalf("Location %q", loc)
	}
	evs := readSSE(t, res.Body, nil)
	res.Body.Close()
	if len(evs) < 5 || evs[0].Event != "metadata" || evs[len(evs)-1].Event != "end" {
		t.Fatalf("events %+v", evs)
	}
	if !strings.Contains(string(evs[0].Data), `"run_id":"r1"`) {
		t.Fatalf("metadata %s", evs[0].Data)
	}
	seen := map[string]bool{}
	var chunks []string
	for i, ev := range evs {
		seen[ev.Event] = true
		if i > 0 && !less(idOf(t, evs[i-1].ID), idOf(t, ev.ID)) {
			t.Fatalf("ids do not increase: %s then %s", evs[i-1].ID, ev.ID)
		}
		if ev.Event == "messages" {
			var tuple []json.RawMessage
			var chunk struct{ Content string }
			if json.Unmarshal(ev.Data, &tuple) != nil || len(tuple) != 2 || json.Unmarshal(tuple[0], &chunk) != nil {
				t.Fatalf("messages event %s: want [chunk, metadata]", ev.Data)
			}
			chunks = append(chunks, chunk.Content)
		}
	}
	for _, want := range []string{"values", "updates", "messages", "events"} {
		if !seen[want] {
			t.Fatalf("no %s event in %+v", want, evs)
		}
	}
	if strings.Join(chunks, "") != "echo: hello" {
		t.Fatalf("chunks %q", chunks)
	}
	path := "/threads/" + th + "/runs/r1/stream?stream_mode=values&stream_mode=updates&stream_mode=messages-tuple&stream_mode=events"
	full := readSSE(t, e.stream("GET", path, "").Body, nil)
	if !reflect.DeepEqual(full, evs) {
		t.Fatalf("a join from the start differs:\n%+v\n%+v", full, evs)
	}
	for k := range evs {
		res := e.stream("GET", path, "", "Last-Event-ID", evs[k].ID)
		rest := readSSE(t, res.Body, nil)
		res.Body.Close()
		if k == len(evs)-1 {
			if len(rest) != 0 {
				t.Fatalf("after the end: %+v", rest)
			}
			continue
		}
		if !reflect.DeepEqual(rest, evs[k+1:]) {
			t.Fatalf("after %s:\n got %+v\nwant %+v", evs[k].ID, rest, evs[k+1:])
		}
	}
}

// A connection cut mid-run, joined again with Last-Event-ID, loses and
// repeats nothing.
func TestServer_streamReconnect(t *testing.T) {
	e := newEnv(t, nil)
	th := e.newThread()
	res := e.stream("POST", "/threads/"+th+"/runs/stream", `{"assistant_id":"slow","on_disconnect":"continue","stream_mode":`+allModes+`,"input":{"messages":[{"role":"user","content":"hi","id":"r2"}]}}`)
	head := readSSE(t, res.Body, func(ev sse) bool { return ev.Event == "messages" })
	res.Body.Close() // cut while the run is still active (the slow echo holds it 400 ms)
	var r struct{ Status string }
	e.json("GET", "/threads/"+th+"/runs/r2", "", 200, &r)
	if r.Status != "running" {
		t.Fatalf("after the cut the run is %s, want running", r.Status)
	}
	path := "/threads/" + th + "/runs/r2/stream?stream_mode=values&stream_mode=updates&stream_mode=messages-tuple&stream_mode=events"
	tail := readSSE(t, e.stream("GET", path, "", "Last-Event-ID", head[len(head)-1].ID).Body, nil)
	all := readSSE(t, e.stream("GET", path, "").Body, nil)
	if got := append(head, tail...); !reflect.DeepEqual(got, all) {
		t.Fatalf("head+tail differs from the whole stream:\n got %+v\nwant %+v", got, all)
	}
	if tail[len(tail)-1].Event != "end" {
		t.Fatalf("tail %+v", tail)
	}
}

// on_disconnect cancel: a client gone mid-run cancels the run.
func TestServer_streamCancelOnDisconnect(t *testing.T) {
	e := newEnv(t, nil)
	th := e.newThread()
	res := e.stream("POST", "/threads/"+th+"/runs/stream", `{"assistant_id":"slow","on_disconnect":"cancel","input":{"messages":[{"role":"user","content":"hi","id":"r3"}]}}`)
	readSSE(t, res.Body, func(ev sse) bool { return ev.Event == "values" })
	res.Body.Close()
	testkit.WaitFor(t, 10*time.Second, "the run to be cancelled", func() (bool, string) {
		var r struct{ Status string }
		e.json("GET", "/threads/"+th+"/runs/r3", "", 200, &r)
		return r.Status == "interrupted", r.Status
	})
}

// A failed run streams an error event before the end.
func TestServer_streamError(t *testing.T) {
	e := newEnv(t, nil)
	th := e.newThread()
	evs := readSSE(t, e.stream("POST", "/threads/"+th+"/runs/stream", `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"fail: boom"}]}}`).Body, nil)
	if n := len(evs); n < 2 || evs[n-2].Event != "error" || !strings.Contains(string(evs[n-2].Data), "boom") || evs[n-1].Event != "end" {
		t.Fatalf("events %+v", evs)
	}
	var out map[string]json.RawMessage
	e.json("POST", "/threads/"+th+"/runs/wait", `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"fail: again"}]}}`, 200, &out)
	if !strings.Contains(string(out["__error__"]), "again") {
		t.Fatalf("wait of a failed run: %s", out)
	}
}
