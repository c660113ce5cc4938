package natsstore_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/natsstore"
)

func TestErrorCode(t *testing.T) {
	wrongLast := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence, Description: "wrong last sequence: 3"}
	for _, c := range []struct {
		name     string
		err      error
		wantCode int
		wantOK   bool
	}{
		{"api error", wrongLast, 10071, true},
		{"wrapped, with a sentinel", fmt.Errorf("natsstore: append: %w: %w", wrongLast, events.ErrThreadBusy), 10071, true},
		{"api error without a code", &jetstream.APIError{Code: 503}, 0, false},
		{"not the server's", fmt.Errorf("natsstore: append: %w", events.ErrUnavailable), 0, false},
		{"nil", nil, 0, false},
		{"plain", errors.New("x"), 0, false},
	} {
		if code, ok := natsstore.ErrorCode(c.err); code != c.wantCode || ok != c.wantOK {
			t.Errorf("%s: ErrorCode = %d, %v; want %d, %v", c.name, code, ok, c.wantCode, c.wantOK)
		}
	}
}
