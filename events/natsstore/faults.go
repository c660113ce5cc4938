package natsstore

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// SendFunc sends one publish attempt, its JetStream headers set, and
// returns the server's ack, or the server's error as a
// *jetstream.APIError, as the JetStream client's PublishMsg does.
type SendFunc func(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error)

// WrapSend is fault injection for simulations and fault tests: wrap sees
// every publish attempt of the store's appends, posts and lease writes, and
// may fail one before sending it, or send it and then lose its ack (return
// a timeout). The store's retry with the same Nats-Msg-Id, and its
// read-back of the subject, must then settle the outcome, which is what
// such a test checks. Call it before the store is used; it is not safe
// concurrently with writes.
func (s *Store) WrapSend(wrap func(next SendFunc) SendFunc) {
	next := SendFunc(s.send)
	if next == nil {
		next = s.requestCtx
	}
	s.send = wrap(next)
}

// requestCtx is request bounded by ctx's deadline, or by the store's
// Timeout when ctx has none: a [SendFunc].
func (s *Store) requestCtx(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	return s.request(ctx, m, time.Until(s.deadline(ctx)))
}
