package natsstore

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
)

// The errors natsstore returns beyond the events sentinels, and how it
// translates the server's. A missing durable or bucket is
// events.ErrNotFound, and an existing stream, bucket or consumer whose
// configuration is unsafe is events.ErrUnsafeConfig: natsstore has no
// sentinels of its own for them. ErrPermissionDenied is in auth.go, with the
// checks that find it.

// ErrNoStream is returned by [New] with [Config.NoCreate] when the stream or
// the lease bucket does not exist on the server. Nothing was created.
var ErrNoStream = errors.New("natsstore: no artifactr stream")

// notSetUp is a missing stream or bucket under NoCreate; it matches
// [ErrNoStream].
type notSetUp struct{ msg string }

func (e *notSetUp) Error() string        { return e.msg }
func (e *notSetUp) Is(target error) bool { return target == ErrNoStream }

// unavailable wraps a failed call. Errors that are not the server's answer
// (timeouts, no connection, no responders) also wrap [events.ErrUnavailable].
func unavailable(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, events.ErrUnsafeConfig) || errors.Is(err, events.ErrClosed) || errors.Is(err, ErrPermissionDenied) {
		return fmt.Errorf("natsstore: %s: %w", what, err)
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return fmt.Errorf("natsstore: %s: %w", what, err)
	}
	return fmt.Errorf("natsstore: %s: %w: %w", what, events.ErrUnavailable, err)
}

// ErrorCode returns the JetStream API error code err carries (such as
// 10071, wrong last sequence), and false when it carries none: the error is
// not the server's answer, or not natsstore's. It is how code outside
// natsstore reads the codes (obs's metric labels, the CLI's messages)
// without importing the JetStream client.
func ErrorCode(err error) (code int, ok bool) {
	c := apiCode(err)
	return int(c), c != 0
}

// apiCode returns err's JetStream error code, or 0 when it carries none.
func apiCode(err error) jetstream.ErrorCode {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode
	}
	return 0
}
