package main

import (
	"testing"

	"github.com/artifactr/artifactr/internal/testkit"
)

// TestBinary_deps_noTesting: nothing test-only reaches the artifactr binary.
// Package testing would mean a test switch (the unfenced store mode once
// hid behind testing.Testing) or a test helper got linked in.
func TestBinary_deps_noTesting(t *testing.T) {
	testkit.NoDeps(t, "github.com/artifactr/artifactr/cmd/artifactr", "testing", "github.com/artifactr/artifactr/events/eventstest")
}
