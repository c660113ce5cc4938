// Package testkit holds helpers shared by the tests that run servers and
// processes: polling a condition with a deadline, and a buffer a process can
// write while a test reads.
package testkit

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// CheckFor polls f until it returns nil or d passes, then fails t with f's
// last error. Tests wait on conditions this way, never on a fixed sleep.
func CheckFor(t testing.TB, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SyncBuffer is a bytes.Buffer safe for a writer (a command or a process)
// writing while a test reads.
type SyncBuffer struct {
	mu sync.Mutex // protects b
	b  bytes.Buffer
}

// Write implements io.Writer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
