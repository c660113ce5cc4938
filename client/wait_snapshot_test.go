package client_test

import (
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
)

// Wait starts from the thread's snapshot when it is from before the
// message, and reads only the tail; a damaged snapshot is ignored.
func TestClient_Wait_fromSnapshot(t *testing.T) {
	c, store := logServer(t)
	ctx := t.Context()
	h := hand{t: t, store: store, now: time.Unix(1000, 0)}
	m1 := h.post("ws", "one")
	cl := h.claim("ws", "r/a")
	h.fenced(events.NewRunStarted(cl, h.now, "run-1", m1, "echo"), cl)
	h.onRun(events.NewRunCompleted(cl, h.now, "run-1", "echo: one"))
	envs, err := store.Load(ctx, "ws", 1)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := projections.Fold("ws", envs).EncodeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	// A runner's snapshot is compact: no consumed messages, no replies.
	compact := projections.Fold("ws", envs)
	compact.Compact()
	compactSnap, err := compact.EncodeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	m2 := h.post("ws", "two")
	h.fenced(events.NewRunStarted(cl, h.now, "run-2", m2, "echo"), cl)
	h.onRun(events.NewRunCompleted(cl, h.now, "run-2", "echo: two"))
	for _, data := range [][]byte{snap, compactSnap, []byte(`{"v":1,"thread":"ws","seq":2,"state":{},"sha256":"00"}`)} {
		if err := store.SaveSnapshot(ctx, "ws", data); err != nil {
			t.Fatal(err)
		}
		res, err := c.Wait(ctx, "ws", m2)
		if err != nil || res.RunID != "run-2" || res.Output != "echo: two" {
			t.Fatalf("Wait with a snapshot: %+v %v", res, err)
		}
		// Whole-thread reads never start from a compact snapshot.
		if th, err := c.Thread(ctx, "ws"); err != nil || len(th.Messages) != 2 || th.Runs[0].Reply() != "echo: one" {
			t.Fatalf("Thread with a snapshot: %v, %+v", err, th)
		}
		// A snapshot from after the message is not used: the wait must
		// see the claims while it waited.
		if res, err := c.Wait(ctx, "ws", m1); err != nil || res.RunID != "run-1" {
			t.Fatalf("Wait for a message before the snapshot: %+v %v", res, err)
		}
	}
}
