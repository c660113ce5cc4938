package natsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
)

// replayBatch is how many messages a whole-stream replay keeps requested:
// the client pulls again when half are consumed. Measured with
// `artifactr bench audit`: larger batches stopped paying at about this size.
const replayBatch = 8192

// replayQueue is how many envelopes the reading goroutine of [Store.Replay]
// may decode ahead of the callback, in chunks of replayChunk.
const (
	replayChunk = 256
	replayQueue = 16
)

// RawMsg is a stored message as [Store.ReplayRaw] reads it: not decoded.
// Its Header and Data belong to the callback only until it returns.
type RawMsg struct {
	Seq     uint64
	Subject string
	Stored  time.Time
	Header  events.Header
	Data    []byte
}

// LastStreamSeq returns the sequence of the last event stored in the
// stream, 0 when it is empty. With partitions each stream has its own
// sequences, so it returns an error wrapping [events.ErrLayout]: ask
// [Store.LastPartitionSeq].
func (s *Store) LastStreamSeq(ctx context.Context) (uint64, error) {
	if err := s.onePartition("last stream sequence"); err != nil {
		return 0, err
	}
	return s.LastPartitionSeq(ctx, 0)
}

// LastPartitionSeq returns the sequence of the last event stored in
// partition p's stream, 0 when it is empty.
func (s *Store) LastPartitionSeq(ctx context.Context, p int) (uint64, error) {
	if err := s.checkPartition(p); err != nil {
		return 0, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	info, err := s.streams[p].Info(ctx)
	if err != nil {
		return 0, unavailable("stream info", err)
	}
	return info.State.LastSeq, nil
}

// Replay calls fn, in stream order, for every event on filter (such as
// <prefix>.> or <prefix>.T.>; with partitions, a filter within one
// partition, such as <prefix>.<p>.>) with a sequence from from (0 is read as 1) up
// to last, the stream's last sequence when Replay was called, and returns
// last. Malformed events are passed with Envelope.Err set: garbage on a
// subject never stops a replay. An error from fn stops it and is returned.
//
// It reads with one ordered consumer and large pulls, and decodes in a
// goroutine of its own while fn runs, so a caller that does real work per
// event (an audit, a rebuild) overlaps it with reading and decoding. fn runs
// on the calling goroutine. ctx bounds the whole replay; the store's
// per-call Timeout does not apply.
func (s *Store) Replay(ctx context.Context, filter string, from uint64, fn func(events.Envelope) error) (uint64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chunks := make(chan []events.Envelope, replayQueue)
	// Chunks go back to the reader once fn has seen them: the envelopes are
	// passed to fn by value, and an envelope is large enough that
	// allocating one per event shows.
	free := make(chan []events.Envelope, replayQueue+2)
	var last uint64
	var readErr error
	go func() {
		defer close(chunks)
		chunk := make([]events.Envelope, 0, replayChunk)
		last, readErr = s.replayMsgs(ctx, filter, from, func(m jetstream.Msg, md *jetstream.MsgMetadata) error {
			chunk = append(chunk, s.decode(m.Subject(), md.Sequence.Stream, md.Timestamp, events.Header(m.Headers()), m.Data()))
			if len(chunk) < replayChunk {
				return nil
			}
			select {
			case chunks <- chunk:
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case chunk = <-free:
			default:
				chunk = make([]events.Envelope, 0, replayChunk)
			}
			return nil
		})
		if len(chunk) > 0 && readErr == nil {
			select {
			case chunks <- chunk:
			case <-ctx.Done():
			}
		}
	}()
	var fnErr error
	for chunk := range chunks {
		if fnErr != nil {
			continue // drain, so the reader can end
		}
		for i := range chunk {
			if fnErr = fn(chunk[i]); fnErr != nil {
				cancel()
				break
			}
		}
		clear(chunk) // drop the events, so they can be collected
		select {
		case free <- chunk[:0]:
		default:
		}
	}
	if fnErr != nil {
		return last, fnErr
	}
	return last, readErr
}

// ReplayRaw is [Store.Replay] without decoding: fn gets each stored message
// as read. It is the raw read rate of the log, which `artifactr bench audit`
// compares the audit with.
func (s *Store) ReplayRaw(ctx context.Context, filter string, from uint64, fn func(RawMsg) error) (uint64, error) {
	return s.replayMsgs(ctx, filter, from, func(m jetstream.Msg, md *jetstream.MsgMetadata) error {
		return fn(RawMsg{Seq: md.Sequence.Stream, Subject: m.Subject(), Stored: md.Timestamp, Header: events.Header(m.Headers()), Data: m.Data()})
	})
}

// replayMsgs reads the messages on filter from sequence from up to the
// stream's last sequence at the call, in order, with an ordered consumer.
func (s *Store) replayMsgs(ctx context.Context, filter string, from uint64, fn func(jetstream.Msg, *jetstream.MsgMetadata) error) (uint64, error) {
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	p, err := s.filterPartition("replay", filter)
	if err != nil {
		return 0, err
	}
	from = max(from, 1)
	last, err := s.LastPartitionSeq(ctx, p)
	if err != nil || last < from {
		return last, err
	}
	target, err := s.replayTarget(ctx, p, filter, last)
	if err != nil || target < from {
		return last, err
	}
	cctx, cancel := s.bound(ctx)
	cons, err := s.streams[p].OrderedConsumer(cctx, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{filter},
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       from,
		InactiveThreshold: loadInactive,
	})
	cancel()
	if err != nil {
		return last, unavailable("replay "+filter, err)
	}
	defer s.dropConsumer(cons)
	it, err := cons.Messages(
		jetstream.PullMaxMessages(replayBatch),
		jetstream.PullExpiry(2*loadHeartbeat),
		jetstream.PullHeartbeat(loadHeartbeat),
	)
	if err != nil {
		return last, unavailable("replay "+filter, err)
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return last, ctx.Err()
			}
			return last, unavailable("replay "+filter, err)
		}
		md, err := m.Metadata()
		if err != nil {
			// Only a broken server sends a delivery without its reply
			// subject; without a sequence the replay cannot go on.
			return last, fmt.Errorf("natsstore: replay %s: no JetStream metadata: %w", filter, err)
		}
		if md.Sequence.Stream > last {
			return last, nil
		}
		if s.subj.IsGuard(m.Subject()) {
			// No event (see events.KindGuard): readers never see one.
		} else if err := fn(m, md); err != nil {
			return last, err
		}
		if md.Sequence.Stream >= target {
			return last, nil
		}
	}
}

// replayTarget is the sequence a replay of filter up to last reads until:
// the last message on filter, as the stream leader has it, capped at last.
// A message on filter stands at or after it. Not the consumer's pending
// count: an ordered consumer may sit on a follower that lags (see replay).
// 0 when filter has no message.
func (s *Store) replayTarget(ctx context.Context, p int, filter string, last uint64) (uint64, error) {
	if filter == s.subj.PartitionAll(p) || filter == s.subj.All() {
		return last, nil // every message of the stream is on it
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	m, err := s.getMsg(ctx, s.streamName(p), msgGetRequest{LastFor: filter})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable("replay "+filter, err)
	}
	return min(m.Sequence, last), nil
}

// NextSeq returns the sequence of the first event stored at or after from,
// and false when there is none. Readers that expect every sequence (the
// stream has no deletes) use it to tell a lost delivery from a real gap.
// With partitions it returns an error wrapping [events.ErrLayout].
func (s *Store) NextSeq(ctx context.Context, from uint64) (uint64, bool, error) {
	if err := s.checkOpen(); err != nil {
		return 0, false, err
	}
	if err := s.onePartition("next sequence"); err != nil {
		return 0, false, err
	}
	return s.NextPartitionSeq(ctx, 0, from)
}

// NextPartitionSeq is [Store.NextSeq] within partition p's stream.
func (s *Store) NextPartitionSeq(ctx context.Context, p int, from uint64) (uint64, bool, error) {
	if err := s.checkOpen(); err != nil {
		return 0, false, err
	}
	if p < 0 || p >= len(s.streams) {
		return 0, false, fmt.Errorf("natsstore: %w: no partition %d of %d", events.ErrLayout, p, len(s.streams))
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	from = max(from, 1)
	for {
		m, err := s.getMsg(ctx, s.streamName(p), msgGetRequest{Seq: from, NextFor: s.subj.PartitionAll(p)})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, unavailable("next event from "+fmt.Sprint(from), err)
		}
		if !s.subj.IsGuard(m.Subject) {
			return m.Sequence, true, nil
		}
		// A guard is no event; its event follows it.
		from = m.Sequence + 1
	}
}
