package eventstest

import (
	"bytes"
	"testing"

	"github.com/artifactr/artifactr/events"
)

// SnapshotHarness opens stores for [RunSnapshot].
type SnapshotHarness struct {
	// Open returns a snapshot store that limits an encoded event to
	// maxEventBytes (a store may keep a large snapshot in pieces of that
	// size). Stores opened by one test may share their snapshots.
	Open func(t *testing.T, maxEventBytes int) events.SnapshotStore
}

// snapshotEventBytes is the event limit of the suite's stores: small, so a
// snapshot of a few tens of kilobytes is larger than one event.
const snapshotEventBytes = 8 << 10

// RunSnapshot runs the contract of [events.SnapshotStore] against the
// stores h opens.
func RunSnapshot(t *testing.T, h SnapshotHarness) {
	tests := []struct {
		name string
		fn   func(*testing.T, events.SnapshotStore)
	}{
		{"Missing", testSnapshotMissing},
		{"SaveReplaces", testSnapshotSaveReplaces},
		{"PerThread", testSnapshotPerThread},
		{"Copied", testSnapshotCopied},
		{"LargerThanAnEvent", testSnapshotLargerThanAnEvent},
		{"TooLarge", testSnapshotTooLarge},
		{"InvalidThread", testSnapshotInvalidThread},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h.Open(t, snapshotEventBytes)) })
	}
}

func saveSnapshot(t *testing.T, s events.SnapshotStore, thread string, data []byte) {
	t.Helper()
	if err := s.SaveSnapshot(ctxT(t), thread, data); err != nil {
		t.Fatalf("save the snapshot of %s (%d bytes): %v", thread, len(data), err)
	}
}

func wantSnapshot(t *testing.T, s events.SnapshotStore, thread string, want []byte) {
	t.Helper()
	got, err := s.LoadSnapshot(ctxT(t), thread)
	if err != nil {
		t.Fatalf("load the snapshot of %s: %v", thread, err)
	}
	if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
		t.Fatalf("snapshot of %s: %d bytes %.40q (nil %v), want %d bytes %.40q (nil %v)",
			thread, len(got), got, got == nil, len(want), want, want == nil)
	}
}

// A thread without a snapshot loads nil and no error.
func testSnapshotMissing(t *testing.T, s events.SnapshotStore) {
	wantSnapshot(t, s, NewThread(t), nil)
}

// A save replaces the thread's snapshot.
func testSnapshotSaveReplaces(t *testing.T, s events.SnapshotStore) {
	th := NewThread(t)
	saveSnapshot(t, s, th, []byte(`{"v":1}`))
	wantSnapshot(t, s, th, []byte(`{"v":1}`))
	saveSnapshot(t, s, th, []byte(`{"v":2,"longer":true}`))
	wantSnapshot(t, s, th, []byte(`{"v":2,"longer":true}`))
	saveSnapshot(t, s, th, []byte(`{}`))
	wantSnapshot(t, s, th, []byte(`{}`))
}

// Each thread has its own snapshot.
func testSnapshotPerThread(t *testing.T, s events.SnapshotStore) {
	a, b := NewThread(t), NewThread(t)
	saveSnapshot(t, s, a, []byte("a"))
	saveSnapshot(t, s, b, []byte("b"))
	wantSnapshot(t, s, a, []byte("a"))
	wantSnapshot(t, s, b, []byte("b"))
}

// The store keeps what was saved, whatever the caller does with its
// buffers afterwards.
func testSnapshotCopied(t *testing.T, s events.SnapshotStore) {
	th := NewThread(t)
	buf := []byte("original")
	saveSnapshot(t, s, th, buf)
	copy(buf, "CHANGED!")
	got, err := s.LoadSnapshot(ctxT(t), th)
	if err != nil {
		t.Fatal(err)
	}
	copy(got, "ALTERED!")
	wantSnapshot(t, s, th, []byte("original"))
}

// A snapshot larger than an event is kept whole (natsstore keeps it in
// chunks), and a small one saved after it replaces it.
func testSnapshotLargerThanAnEvent(t *testing.T, s events.SnapshotStore) {
	th := NewThread(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 7*snapshotEventBytes/16+5)
	saveSnapshot(t, s, th, big)
	wantSnapshot(t, s, th, big)
	saveSnapshot(t, s, th, []byte(`{"v":1}`))
	wantSnapshot(t, s, th, []byte(`{"v":1}`))
}

// A snapshot over the store's bound (256 events' worth in both stores) is
// refused with ErrTooLarge, and the one before it stays.
func testSnapshotTooLarge(t *testing.T, s events.SnapshotStore) {
	th := NewThread(t)
	saveSnapshot(t, s, th, []byte("kept"))
	err := s.SaveSnapshot(ctxT(t), th, make([]byte, 257*snapshotEventBytes))
	wantErr(t, err, events.ErrTooLarge, "save of a snapshot over the bound")
	wantSnapshot(t, s, th, []byte("kept"))
}

// A bad thread id is refused before anything is read or written.
func testSnapshotInvalidThread(t *testing.T, s events.SnapshotStore) {
	wantErr(t, s.SaveSnapshot(ctxT(t), "bad.thread", []byte("x")), events.ErrInvalidThreadID, "save with a bad thread id")
	_, err := s.LoadSnapshot(ctxT(t), "bad thread")
	wantErr(t, err, events.ErrInvalidThreadID, "load with a bad thread id")
}
