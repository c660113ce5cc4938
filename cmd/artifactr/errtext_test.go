package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestOverlapError: only JetStream's "subjects overlap" (10065), however
// wrapped, is explained as a mistyped --stream.
func TestOverlapError(t *testing.T) {
	overlap := &jetstream.APIError{Code: 400, ErrorCode: 10065, Description: "subjects overlap with an existing stream"}
	if err := overlapError("nats://x", "ARTIFACTR", fmt.Errorf("natsstore: create stream: %w", overlap)); err == nil || !strings.Contains(err.Error(), "is --stream right?") {
		t.Errorf("overlap: %v, want the --stream explanation", err)
	}
	other := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}
	for _, err := range []error{other, errors.New("x"), nil} {
		if got := overlapError("nats://x", "ARTIFACTR", err); got != nil {
			t.Errorf("overlapError(%v) = %v, want nil", err, got)
		}
	}
}
