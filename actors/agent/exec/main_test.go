package exec_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: every
// run must reap its program and stop its readers (DESIGN.md §4).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
