package events

import (
	"fmt"
	"regexp"
)

// W3C trace context headers (https://www.w3.org/TR/trace-context/) a post
// may carry, so the run that takes the message continues the poster's trace.
const (
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

// PostOption sets optional per-call behaviour of Post.
type PostOption func(*PostOptions) error

// PostOptions are the options a PostOption sets. Stores read them.
type PostOptions struct {
	// TraceParent and TraceState are stored as the message's traceparent
	// and tracestate headers; "" stores none.
	TraceParent string
	TraceState  string
	// ExpectRun makes the post carry a check that the thread's run subject's
	// last sequence is ExpectRunSeq (see [WithExpectRunSeq]).
	ExpectRun    bool
	ExpectRunSeq uint64
}

// traceParentRe is a version-00 traceparent: version, trace id, parent id,
// flags, in lower-case hex.
var traceParentRe = regexp.MustCompile(`^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)

// maxTraceStateBytes bounds tracestate as the W3C spec lets vendors do.
const maxTraceStateBytes = 512

// WithTraceContext stores a W3C trace context with the message: its
// traceparent and, optionally, its tracestate. An empty traceparent is a
// no-op; a malformed one is an error wrapping [ErrInvalidEvent].
func WithTraceContext(traceparent, tracestate string) PostOption {
	return func(o *PostOptions) error {
		if traceparent == "" {
			return nil
		}
		if !traceParentRe.MatchString(traceparent) || traceparent[:2] == "ff" {
			return fmt.Errorf("%w: malformed traceparent %q", ErrInvalidEvent, traceparent)
		}
		if len(tracestate) > maxTraceStateBytes {
			return fmt.Errorf("%w: tracestate of %d bytes exceeds %d", ErrInvalidEvent, len(tracestate), maxTraceStateBytes)
		}
		o.TraceParent, o.TraceState = traceparent, tracestate
		return nil
	}
}

// ApplyPostOptions applies opts in order and returns the result, or the
// first option's error.
func ApplyPostOptions(opts []PostOption) (PostOptions, error) {
	var o PostOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// SetHeaders adds the options' headers to h.
func (o PostOptions) SetHeaders(h Header) {
	if o.TraceParent != "" {
		h[HeaderTraceParent] = []string{o.TraceParent}
		if o.TraceState != "" {
			h[HeaderTraceState] = []string{o.TraceState}
		}
	}
}
