package client_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
)

// Thread (show) starts from the thread's snapshot and reads only the events
// after it. A snapshot that does not verify, is past the log, is past the
// --at asked for, or holds a fork it did not resolve is ignored: the thread
// is folded from its first event.
func TestClient_Thread_fromSnapshot(t *testing.T) {
	c, store := logServer(t)
	ctx := t.Context()
	h := hand{t: t, store: store, now: time.Unix(1000, 0)}
	m1 := h.post("ts", "one")
	cl := h.claim("ts", "r/a")
	h.fenced(events.NewRunStarted(cl, h.now, "run-1", m1, "echo"), cl)
	h.onRun(events.NewRunCompleted(cl, h.now, "run-1", "echo: one"))
	envs, err := store.Load(ctx, "ts", 1)
	if err != nil {
		t.Fatal(err)
	}
	head := projections.Fold("ts", envs)
	m2 := h.post("ts", "two")
	all, err := store.Load(ctx, "ts", 1)
	if err != nil {
		t.Fatal(err)
	}
	whole := projections.Fold("ts", all)

	// A snapshot that verifies but says "marked" where the log says
	// "one": Thread shows "marked", so it read the snapshot, not the log.
	marked := head.Clone()
	marked.Messages[0].Text = "marked"
	snap := func(th *projections.Thread) []byte {
		t.Helper()
		data, err := th.EncodeSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	save := func(data []byte) {
		t.Helper()
		if err := store.SaveSnapshot(ctx, "ts", data); err != nil {
			t.Fatal(err)
		}
	}
	text := func(opts ...client.ThreadOption) (*projections.Thread, string) {
		t.Helper()
		th, err := c.Thread(ctx, "ts", opts...)
		if err != nil {
			t.Fatal(err)
		}
		return th, th.Messages[0].Text
	}
	save(snap(marked))
	if th, got := text(); got != "marked" || len(th.Messages) != 2 || th.Messages[1].Seq != m2 || th.LastSeq != whole.LastSeq {
		t.Fatalf("from the snapshot: %q, %d messages, last seq %d", got, len(th.Messages), th.LastSeq)
	}
	if _, got := text(client.AtSeq(m2)); got != "marked" {
		t.Errorf("--at after the snapshot: %q, want it from the snapshot", got)
	}
	if _, got := text(client.AtSeq(m1)); got != "one" {
		t.Errorf("--at before the snapshot: %q, want it from the log", got)
	}

	past := marked.Clone()
	past.LastSeq = whole.LastSeq + 100 // of another log
	forked := marked.Clone()
	forked.Fork = &projections.Fork{Source: "src", SourceSeq: 1, Seq: 1, Reference: true, Unresolved: true}
	for name, data := range map[string][]byte{
		"damaged":         []byte(`{"v":1,"thread":"ts","seq":2,"state":{},"sha256":"00"}`),
		"past the log":    snap(past),
		"unresolved fork": snap(forked),
	} {
		save(data)
		th, _ := text()
		if !reflect.DeepEqual(th, whole) {
			t.Errorf("%s snapshot: Thread %+v, want the whole fold %+v", name, th, whole)
		}
	}
}
