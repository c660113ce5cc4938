// Package testkit holds helpers shared by the tests that run servers and
// processes: polling a condition with a deadline, and a buffer a process can
// write while a test reads.
//
// It does not import package testing: [TB] is the part of testing.TB its
// helpers use, so the test helpers of production packages (natsembed's) can
// share it without linking testing into a binary.
package testkit

import (
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
)

// PollInterval is how often [Poll] and [CheckFor] try their condition.
const PollInterval = 10 * time.Millisecond

// TB is the part of testing.TB the helpers need; *testing.T, *testing.B and
// *testing.F satisfy it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Log(args ...any)
	TempDir() string
	Cleanup(func())
	Skip(args ...any)
}

// Poll calls f every [PollInterval] until it returns nil or d passes, and
// returns f's last error then (nil on success). It is the one polling loop
// of the tests: they wait on conditions this way, never on a fixed sleep.
func Poll(d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(PollInterval)
	}
}

// CheckFor polls f until it returns nil or d passes, then fails t with f's
// last error.
func CheckFor(t TB, d time.Duration, f func() error) {
	t.Helper()
	if err := Poll(d, f); err != nil {
		t.Fatalf("after %s: %v", d, err)
	}
}

// WaitFor polls cond until it holds or d passes, then fails t naming what it
// waited for and the last state cond described.
func WaitFor(t TB, d time.Duration, what string, cond func() (ok bool, state string)) {
	t.Helper()
	err := Poll(d, func() error {
		if ok, state := cond(); !ok {
			return fmt.Errorf("last state: %s", state)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s; %v", d, what, err)
	}
}

// Deps returns the import paths in pkg's dependency closure (go list
// -deps), pkg included. It skips t when the go command is not on PATH.
func Deps(t TB, pkg string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("testkit.Deps: no go command on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}

// NoDeps fails t if pkg depends on any of the packages named in bad, or on a
// package under one that ends in "/".
func NoDeps(t TB, pkg string, bad ...string) {
	t.Helper()
	for _, d := range Deps(t, pkg) {
		if slices.ContainsFunc(bad, func(b string) bool {
			return d == b || strings.HasSuffix(b, "/") && strings.HasPrefix(d, b)
		}) {
			t.Fatalf("%s depends on %s (go list -deps %s)", pkg, d, pkg)
		}
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
