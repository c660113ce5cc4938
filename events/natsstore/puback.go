package natsstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// request sends one publish attempt and waits up to timeout, or until ctx
// ends, for its ack. It is what jetstream.PublishMsg does, less its retries
// on no responders (publish has its own), with the server's usual ack read
// without encoding/json, which took a twentieth of the runner's CPU in
// bench scale, and with no context made per attempt (see replyMux).
func (s *Store) request(ctx context.Context, m *nats.Msg, timeout time.Duration) (*jetstream.PubAck, error) {
	g, err := s.mux()
	if err != nil {
		return nil, err
	}
	resp, err := g.request(ctx, m, timeout, false)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, jetstream.ErrNoStreamResponse
		}
		return nil, err
	}
	return parsePubAck(resp[0].Data)
}

// parsePubAck reads a publish's reply as jetstream.PublishMsg does: a
// PubAck, or the server's error as a *jetstream.APIError.
func parsePubAck(b []byte) (*jetstream.PubAck, error) {
	if pa, ok := fastPubAck(b); ok {
		return pa, nil
	}
	var r struct {
		Error *jetstream.APIError `json:"error,omitempty"`
		*jetstream.PubAck
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, jetstream.ErrInvalidJSAck
	}
	if r.Error != nil {
		return nil, fmt.Errorf("nats: %w", r.Error)
	}
	if r.PubAck == nil || r.PubAck.Stream == "" {
		return nil, jetstream.ErrInvalidJSAck
	}
	return r.PubAck, nil
}

// fastPubAck reads the acks the server writes from its template:
//
//	{"stream":"S","seq":N}
//	{"stream":"S","domain":"D","seq":N}
//	either with ,"duplicate": true before the brace.
//
// Anything else, or a name with an escape in it, is left to encoding/json.
func fastPubAck(b []byte) (*jetstream.PubAck, bool) {
	var pa jetstream.PubAck
	var ok bool
	if b, ok = cut(b, `{"stream":"`); !ok {
		return nil, false
	}
	if pa.Stream, b, ok = plainString(b); !ok || pa.Stream == "" {
		return nil, false
	}
	if rest, ok := cut(b, `,"domain":"`); ok {
		if pa.Domain, b, ok = plainString(rest); !ok {
			return nil, false
		}
	}
	if b, ok = cut(b, `,"seq":`); !ok {
		return nil, false
	}
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	seq, err := strconv.ParseUint(string(b[:i]), 10, 64)
	if err != nil {
		return nil, false
	}
	pa.Sequence = seq
	switch rest := b[i:]; {
	case string(rest) == "}":
	case string(rest) == `,"duplicate": true}` || string(rest) == `,"duplicate":true}`:
		pa.Duplicate = true
	default:
		return nil, false
	}
	return &pa, true
}

func cut(b []byte, prefix string) ([]byte, bool) {
	if !bytes.HasPrefix(b, []byte(prefix)) {
		return b, false
	}
	return b[len(prefix):], true
}

// plainString reads a JSON string's body up to its closing quote, refusing
// escapes.
func plainString(b []byte) (string, []byte, bool) {
	for i, c := range b {
		switch {
		case c == '"':
			return string(b[:i]), b[i+1:], true
		case c == '\\' || c < 0x20:
			return "", b, false
		}
	}
	return "", b, false
}
