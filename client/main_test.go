package client_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every watch, wait and runner the tests and examples start ends with them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
