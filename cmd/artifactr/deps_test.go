package main

import (
	"testing"

	"github.com/artifactr/artifactr/internal/testkit"
)

// TestBinary_deps_noTesting: nothing test-only reaches the artifactr binary.
// Package testing would mean a test switch (the unfenced store mode once
// hid behind testing.Testing) or a test helper got linked in. The test
// support packages (testkit, natsembedtest, eventstest) do not import
// testing, so they are named too: a helper file in a production package
// (natsembed's RunForTest once was) would otherwise link them unnoticed.
func TestBinary_deps_noTesting(t *testing.T) {
	testkit.NoDeps(t, "github.com/artifactr/artifactr/cmd/artifactr",
		"testing",
		"github.com/artifactr/artifactr/events/eventstest",
		"github.com/artifactr/artifactr/internal/testkit",
		"github.com/artifactr/artifactr/internal/natsembed/natsembedtest",
	)
}
