package httpapi_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/testkit"
)

// metadataEvents counts thread's thread_metadata events.
func metadataEvents(t *testing.T, e *env, thread string) int {
	t.Helper()
	envs, err := e.store.Load(t.Context(), thread, 1)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, env := range envs {
		if env.Type == events.TypeThreadMetadata {
			n++
		}
	}
	return n
}

// TestServer_runsSetGraphID: a run sets its thread's graph_id and
// assistant_id metadata to its assistant's, as LangGraph's server does,
// keeping the other keys; a thread created by a run (if_not_exists) has
// them from its first event. A run of the same assistant writes nothing
// more, and a run that is refused (reject while busy) writes nothing.
func TestServer_runsSetGraphID(t *testing.T) {
	e := newEnv(t, nil)
	var slow, echo, hold struct {
		AssistantID string `json:"assistant_id"`
	}
	e.json("GET", "/assistants/slow", "", 200, &slow)
	e.json("GET", "/assistants/echo", "", 200, &echo)
	e.json("GET", "/assistants/hold", "", 200, &hold)
	e.json("POST", "/threads", `{"thread_id":"t-g","metadata":{"user":"ada"}}`, 200, nil)
	check := func(id, graph, assistant string, events int) {
		t.Helper()
		var th thread
		e.json("GET", "/threads/"+id, "", 200, &th)
		if th.Metadata["graph_id"] != graph || th.Metadata["assistant_id"] != assistant || (id == "t-g" && th.Metadata["user"] != "ada") {
			t.Fatalf("%s metadata %v; want graph_id %s, assistant_id %s and the thread's own", id, th.Metadata, graph, assistant)
		}
		if n := metadataEvents(t, e, id); n != events {
			t.Fatalf("%s has %d thread_metadata events; want %d", id, n, events)
		}
	}
	run := `{"assistant_id":"%s","multitask_strategy":"%s","input":{"messages":[{"role":"user","content":"hi","id":"%s"}]}}`
	e.json("POST", "/threads/t-g/runs", fmt.Sprintf(run, "hold", "reject", "g1"), 200, nil)
	check("t-g", "hold", hold.AssistantID, 2)
	// Busy under reject (hold keeps g1 active once it started): 409, and
	// the metadata stays (LangGraph too keeps a busy thread's graph_id).
	testkit.WaitFor(t, 10*time.Second, "run g1 to start", func() (bool, string) {
		var r struct{ Status string }
		e.json("GET", "/threads/t-g/runs/g1", "", 200, &r)
		return r.Status == "running", r.Status
	})
	if code, b := e.do("POST", "/threads/t-g/runs", fmt.Sprintf(run, "echo", "reject", "g2")); code != 409 {
		t.Fatalf("reject while busy: %d %s", code, b)
	}
	check("t-g", "hold", hold.AssistantID, 2)
	if code, b := e.do("POST", "/threads/t-g/runs/g1/cancel?wait=1", ""); code != 204 {
		t.Fatalf("cancel: %d %s", code, b)
	}
	e.json("POST", "/threads/t-g/runs/wait", fmt.Sprintf(run, "slow", "enqueue", "g3"), 200, nil)
	check("t-g", "slow", slow.AssistantID, 3)
	e.json("POST", "/threads/t-g/runs/wait", fmt.Sprintf(run, "slow", "enqueue", "g4"), 200, nil)
	check("t-g", "slow", slow.AssistantID, 3)
	e.json("POST", "/threads/t-g/runs/wait", fmt.Sprintf(run, "echo", "enqueue", "g5"), 200, nil)
	check("t-g", "echo", echo.AssistantID, 4)

	e.json("POST", "/threads/t-new/runs/wait", `{"assistant_id":"echo","if_not_exists":"create","input":{"messages":[{"role":"user","content":"hi"}]}}`, 200, nil)
	check("t-new", "echo", echo.AssistantID, 1)
	testkit.WaitFor(t, 10*time.Second, "search by graph_id", func() (bool, string) {
		var found []thread
		e.json("POST", "/threads/search", `{"metadata":{"graph_id":"echo"}}`, 200, &found)
		return len(found) == 2, fmt.Sprintf("%+v", found)
	})
}
