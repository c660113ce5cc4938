package natsstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/sys"
)

// Bounds of the publish retry loop.
const (
	maxPublishAttempts = 8
	minAttemptTimeout  = 250 * time.Millisecond
	backoffBase        = 20 * time.Millisecond
	backoffMax         = 400 * time.Millisecond
	// maxReadBack bounds the scan for a write whose ack was lost.
	maxReadBack = 10_000
	// reconnectWait is how often a write not sent for want of a
	// connection looks again.
	reconnectWait = 50 * time.Millisecond
)

// write is one checked publish, ready to be sent again with the same
// Nats-Msg-Id until its outcome is known.
type write struct {
	what    string      // for errors: "append run_started to threads.T.run"
	stream  string      // the stream the subject belongs to, for reading back
	subject string      // the stored subject: checks and read-back are on it
	pub     string      // the subject to publish to, if not subject (a KV write under a domain)
	typ     events.Type // an event's type, set with the schema as headers; "" for a KV write
	header  nats.Header // further headers, without the ones above and below
	data    []byte
	msgID   string
	// jsHeader is the JetStream headers besides the msg id, key and value
	// pairs: the expected-sequence check and the TTL.
	jsHeader []string
	// after is a sequence the write, if it landed, must be above: the
	// expected sequence it carries. Reading back starts there.
	after uint64
	// landedBefore is set when the msg id was chosen by the caller, so a
	// call before this one may have stored it.
	landedBefore bool
}

// outcome is what publish learned. Exactly one of ack (landed), refused
// (the check failed; nothing was written) or err is set.
type outcome struct {
	ack     events.Ack
	refused error // the server's wrong-last-sequence error
	err     error
}

// publish sends w and retries until its outcome is known (DESIGN §3,
// "Ambiguous outcomes"):
//   - an ack, possibly a duplicate ack of an earlier attempt: landed;
//   - 10071 wrong last sequence: the check failed and nothing was written
//     by this attempt. If an earlier attempt may have landed, the subject is
//     read back for our msg id, because a single-replica stream checks the
//     expected sequence before it deduplicates;
//   - 10164 (replicated streams: another proposal on the subject in flight):
//     no verdict; retry;
//   - no API error (timeout, disconnect, no responders): unknown; retry with
//     the same msg id.
//
// The read-back that settles a refusal runs on a fresh context bounded by
// the store's Timeout: the caller's may have ended meanwhile (a thread actor
// whose claim was lost), and the refusal must still be reported as one, not
// as "canceled".
func (s *Store) publish(ctx context.Context, w write) outcome {
	maybeLanded := w.landedBefore
	sentUnknown := false // an attempt of this call got no verdict
	callerCtx, detached := ctx, context.WithoutCancel(ctx)
	var lastErr error
	inFlight := false // the last attempt got 10164
	attemptTimeout := max(s.cfg.Timeout/4, minAttemptTimeout)
	// A deadline, not a context: an append allocates none (see replyMux).
	deadline := s.deadline(ctx)
	attempts := 0
	for ; attempts < maxPublishAttempts; attempts++ {
		if attempts > 0 {
			d := backoff(attempts)
			if time.Until(deadline) <= d || !sys.Sleep(ctx, d) {
				break
			}
		}
		left := time.Until(deadline)
		if ctx.Err() != nil || left <= 0 {
			break // nothing sent this time
		}
		pa, err := s.sendOnce(ctx, w, min(attemptTimeout, left))
		if err == nil {
			return outcome{ack: events.Ack{Seq: pa.Sequence, Duplicate: pa.Duplicate}}
		}
		lastErr, inFlight = err, false
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) {
			if errors.Is(err, nats.ErrReconnectBufExceeded) {
				// Not sent: the connection is down and keeps no buffer.
				// Wait for it, without spending an attempt.
				lastErr = fmt.Errorf("%w: %w", err, nats.ErrConnectionReconnecting)
				if !sys.Sleep(ctx, min(reconnectWait, max(time.Until(deadline), 0))) {
					break
				}
				attempts--
				continue
			}
			if errors.Is(err, nats.ErrMaxPayload) && !maybeLanded {
				// Refused by the client before sending: headers and
				// payload together exceed the server's limit.
				return outcome{err: fmt.Errorf("%w: %s: %d-byte payload plus headers over the server's max payload: %w", events.ErrTooLarge, w.what, len(w.data), err)}
			}
			if derr := s.publishDenied(w.pubSubject()); derr != nil {
				return outcome{err: fmt.Errorf("natsstore: %s: %w", w.what, derr)}
			}
			maybeLanded, sentUnknown = true, true
			if s.closed.Load() {
				break
			}
			continue
		}
		switch {
		case apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant:
			inFlight = true
		case apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence:
			if !maybeLanded {
				return outcome{refused: err}
			}
			bctx, cancel := s.settleContext(detached)
			defer cancel()
			return s.settle(bctx, w, err)
		case isNoStorage(apiErr.ErrorCode):
			// A definite refusal of this attempt, which retrying soon will
			// not change. An attempt of this call that got no verdict may
			// have landed, before the store filled up: look for it.
			if !sentUnknown {
				return outcome{err: fmt.Errorf("natsstore: %s: %w: %w", w.what, events.ErrNoStorage, err)}
			}
			bctx, cancel := s.settleContext(detached)
			defer cancel()
			if ack, found, ferr := s.findLanded(bctx, w); ferr == nil && found {
				return outcome{ack: ack}
			}
			return outcome{err: fmt.Errorf("%w: %w", unknownOutcome(w, err), events.ErrNoStorage)}
		case apiErr.Code == 503:
			// JetStream is electing or catching up: not stored; retry.
		default:
			if maybeLanded {
				return outcome{err: unknownOutcome(w, err)}
			}
			return outcome{err: fmt.Errorf("natsstore: %s: %w", w.what, err)}
		}
	}
	if lastErr == nil {
		lastErr = callerCtx.Err()
	}
	if lastErr == nil {
		lastErr = context.DeadlineExceeded
	}
	if maybeLanded {
		// A last look, if time is left: the write may have landed while
		// its acks were lost.
		if callerCtx.Err() == nil && time.Now().Before(deadline) {
			bctx, cancel := context.WithDeadline(ctx, deadline)
			ack, found, err := s.findLanded(bctx, w)
			cancel()
			if err == nil && found {
				return outcome{ack: ack}
			}
		}
		return outcome{err: unknownOutcome(w, lastErr)}
	}
	if inFlight {
		// Refused while another writer's proposal on the checked subject
		// was in flight, every time: nothing of ours was written.
		return outcome{refused: lastErr}
	}
	return outcome{err: fmt.Errorf("natsstore: %s: not written after %d attempts: %w: %w", w.what, attempts, events.ErrUnavailable, lastErr)}
}

// isNoStorage reports whether a publish error code says the server is out
// of storage: 10023 (insufficient resources), 10047 (insufficient storage
// resources) or 10028 (insufficient memory resources).
func isNoStorage(code jetstream.ErrorCode) bool {
	switch code {
	case 10023, 10047, 10028:
		return true
	}
	return false
}

// settleContext is the context of a read-back that settles a write: fresh
// and bounded by the store's Timeout, whatever is left of the write's own
// deadline or its caller's context (see publish).
func (s *Store) settleContext(detached context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(detached, s.cfg.Timeout)
}

// settle decides a refusal that followed an unknown outcome: the write
// landed if its msg id is on the subject after w.after.
func (s *Store) settle(ctx context.Context, w write, refusal error) outcome {
	ack, found, err := s.findLanded(ctx, w)
	switch {
	case err != nil:
		return outcome{err: unknownOutcome(w, errors.Join(refusal, err))}
	case found:
		return outcome{ack: ack}
	default:
		// Sequences on a subject only grow (no deletes, no TTL), so the
		// check that failed now fails for any copy still in flight too.
		return outcome{refused: refusal}
	}
}

// findLanded looks for w's msg id on w.subject above w.after: the last
// message first (the usual case), then forward from w.after.
func (s *Store) findLanded(ctx context.Context, w write) (events.Ack, bool, error) {
	last, err := s.getMsg(ctx, w.stream, msgGetRequest{LastFor: w.subject})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return events.Ack{}, false, nil
	}
	if err != nil {
		return events.Ack{}, false, err
	}
	if last.Sequence <= w.after {
		return events.Ack{}, false, nil
	}
	if last.Header.Get(jetstream.MsgIDHeader) == w.msgID {
		return events.Ack{Seq: last.Sequence, Duplicate: true}, true, nil
	}
	seq := w.after + 1
	for range maxReadBack {
		m, err := s.getMsg(ctx, w.stream, msgGetRequest{Seq: seq, NextFor: w.subject})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return events.Ack{}, false, nil
		}
		if err != nil {
			return events.Ack{}, false, err
		}
		if m.Sequence >= last.Sequence {
			return events.Ack{}, false, nil
		}
		if m.Header.Get(jetstream.MsgIDHeader) == w.msgID {
			return events.Ack{Seq: m.Sequence, Duplicate: true}, true, nil
		}
		seq = m.Sequence + 1
	}
	return events.Ack{}, false, fmt.Errorf("natsstore: more than %d messages on %s since %d; gave up looking for %s", maxReadBack, w.subject, w.after, w.msgID)
}

// sendOnce publishes one attempt of w and waits up to timeout for its ack.
func (s *Store) sendOnce(ctx context.Context, w write, timeout time.Duration) (*jetstream.PubAck, error) {
	m := w.msg()
	if s.send != nil {
		// The hook sees the attempt's bound as its context's deadline.
		actx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return s.send(actx, m)
	}
	return s.request(ctx, m, timeout)
}

// msg builds a fresh message for one attempt of w, with all its headers.
func (w write) msg() *nats.Msg {
	n := len(w.header) + 1 + len(w.jsHeader)/2
	if w.typ != "" {
		n += 2
	}
	h := make(nats.Header, n)
	// The values share one backing array: a write's headers cost two
	// allocations, not one per header.
	vals := make([]string, 0, n)
	set := func(k, v string) {
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	for k, v := range w.header {
		h[k] = v
	}
	if w.typ != "" {
		set(events.HeaderType, string(w.typ))
		set(events.HeaderSchema, events.SchemaVersion)
	}
	set(events.HeaderMsgID, w.msgID)
	for i := 0; i+1 < len(w.jsHeader); i += 2 {
		set(w.jsHeader[i], w.jsHeader[i+1])
	}
	return &nats.Msg{Subject: w.pubSubject(), Data: w.data, Header: h}
}

// expectLast is the header of an expected last sequence on the subject
// written to, as jetstream.WithExpectLastSequencePerSubject sets it.
func expectLast(seq uint64) []string {
	return []string{events.HeaderExpectSeq, strconv.FormatUint(seq, 10)}
}

// expectLastFor is the headers of an expected last sequence on subject, as
// jetstream.WithExpectLastSequenceForSubject sets them.
func expectLastFor(seq uint64, subject string) []string {
	return []string{events.HeaderExpectSeq, strconv.FormatUint(seq, 10), events.HeaderExpectSubj, subject}
}

// msgTTL is the header of a message TTL, as jetstream.WithMsgTTL sets it.
func msgTTL(d time.Duration) []string {
	return []string{jetstream.MsgTTLHeader, d.String()}
}

// pubSubject is the subject w is published to.
func (w write) pubSubject() string {
	if w.pub != "" {
		return w.pub
	}
	return w.subject
}

func unknownOutcome(w write, err error) error {
	return fmt.Errorf("natsstore: %s: outcome unknown (retry with msg id %q to settle it): %w: %w",
		w.what, w.msgID, events.ErrUnavailable, err)
}

// backoff is the wait before attempt n (n >= 1): exponential with jitter,
// so writers that collided do not retry in step.
func backoff(n int) time.Duration {
	d := backoffBase << (n - 1)
	if d > backoffMax || d <= 0 {
		d = backoffMax
	}
	return d/2 + rand.N(d/2+1)
}
