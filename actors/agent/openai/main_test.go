package openai_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: every
// run must close its response body and stop its stream reader.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
