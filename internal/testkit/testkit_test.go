package testkit

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fakeTB records a failure instead of ending the test.
type fakeTB struct {
	*testing.T
	failed string
}

func (f *fakeTB) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestPoll_untilNil(t *testing.T) {
	n := 0
	err := Poll(30*time.Second, func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("Poll = %v after %d calls, want nil after 3", err, n)
	}
}

func TestPoll_lastErrorAtDeadline(t *testing.T) {
	n := 0
	err := Poll(0, func() error { n++; return fmt.Errorf("try %d", n) })
	if err == nil || err.Error() != fmt.Sprintf("try %d", n) {
		t.Fatalf("Poll = %v, want the last try's error", err)
	}
}

func TestWaitFor_failsWithState(t *testing.T) {
	f := &fakeTB{T: t}
	WaitFor(f, 0, "the thing", func() (bool, string) { return false, "3 pending" })
	if !strings.Contains(f.failed, "the thing") || !strings.Contains(f.failed, "3 pending") {
		t.Fatalf("failure %q does not name what and the state", f.failed)
	}
}

func TestNoDeps(t *testing.T) {
	f := &fakeTB{T: t}
	NoDeps(f, "github.com/artifactr/artifactr/internal/testkit", "os/exec")
	if !strings.Contains(f.failed, "depends on os/exec") {
		t.Fatalf("NoDeps on testkit (which imports os/exec) = %q, want a failure", f.failed)
	}
	f.failed = ""
	NoDeps(f, "github.com/artifactr/artifactr/internal/testkit", "testing", "github.com/nats-io/")
	if f.failed != "" {
		t.Fatalf("testkit must not depend on testing or nats: %s", f.failed)
	}
}
