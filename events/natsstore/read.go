package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
)

// loadBatch is how many messages Load asks for per pull; the client keeps
// about this many buffered. Measured in BenchmarkLoad.
const loadBatch = 1000

// loadInactive lets the server drop a Load consumer whose delete request
// was lost.
const loadInactive = 10 * time.Second

// loadHeartbeat is the shortest the client allows. On a cluster the first
// pull to a new consumer can be lost: the create reply (system account
// route) may overtake the consumer's subscription interest (account route).
// The ordered consumer recovers after two missed heartbeats, so this bounds
// that stall at about a second rather than the default ten.
const loadHeartbeat = 500 * time.Millisecond

// Load implements [events.Reader]: with batched direct gets on a
// single-replica stream, else with an ordered consumer on the thread's
// subjects, read up to the thread's last sequence as the stream leader
// reports it (see replay).
func (s *Store) Load(ctx context.Context, thread string, from uint64) ([]events.Envelope, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if s.direct {
		// By literal subjects up to the stream's last sequence now: a
		// wildcard direct get scans every message after the thread's first.
		last, err := s.LastPartitionSeq(ctx, s.subj.PartitionOf(thread))
		if err != nil {
			return nil, err
		}
		if last == 0 {
			return nil, nil
		}
		return s.LoadUpTo(ctx, thread, from, last)
	}
	last, err := events.ThreadLastSeq(ctx, s, thread)
	if err != nil {
		return nil, err
	}
	envs, err := s.replay(ctx, s.streams[s.subj.PartitionOf(thread)], s.subj.ThreadAll(thread), max(from, 1), last)
	if err != nil {
		return nil, unavailable("load "+thread, err)
	}
	return envs, nil
}

// replay reads the messages on filter from sequence from until it has
// delivered one at or past target, which the caller read from the stream
// leader (LastSeq) and which has a message on filter at or after it. It
// returns them all, that one included.
//
// The target, not the consumer's pending count, ends the read: an ordered
// consumer is an R1 consumer, and on a replicated stream the server may
// place it on a follower that has not applied the last acked writes yet.
// Its pending count then misses them, and a claim would plan on a history
// without consuming writes that landed before its marker. Waiting for the
// target lets the follower catch up.
func (s *Store) replay(ctx context.Context, st jetstream.Stream, filter string, from, target uint64) ([]events.Envelope, error) {
	if target < from {
		return nil, nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{filter},
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       from,
		InactiveThreshold: loadInactive,
	})
	if err != nil {
		return nil, err
	}
	defer s.dropConsumer(cons)
	it, err := cons.Messages(
		jetstream.PullMaxMessages(int(min(target-from+1, loadBatch))),
		jetstream.PullExpiry(2*loadHeartbeat),
		jetstream.PullHeartbeat(loadHeartbeat),
	)
	if err != nil {
		return nil, err
	}
	defer it.Stop()
	var envs []events.Envelope
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return nil, err
		}
		if s.subj.IsGuard(m.Subject()) {
			// No event (see events.KindGuard); its event follows it.
			if md, err := m.Metadata(); err == nil && md.Sequence.Stream >= target {
				return envs, nil
			}
			continue
		}
		env, _ := s.decodeMsg(m)
		envs = append(envs, env)
		if env.Seq >= target {
			return envs, nil
		}
	}
}

// dropConsumer asks the server to delete an ordered consumer we are done
// with, without waiting: the inactivity threshold is the fallback.
func (s *Store) dropConsumer(c jetstream.Consumer) {
	if info := c.CachedInfo(); info != nil && !s.nc.IsClosed() {
		_ = s.nc.Publish(s.api.subject("CONSUMER.DELETE."+info.Stream+"."+info.Name), nil)
	}
}

func (s *Store) decodeMsg(m jetstream.Msg) (events.Envelope, *jetstream.MsgMetadata) {
	md, err := m.Metadata()
	if err != nil {
		// Only a broken server sends a delivery without its reply subject.
		env := s.decode(m.Subject(), 0, time.Time{}, events.Header(m.Headers()), m.Data())
		env.Err = errors.Join(env.Err, fmt.Errorf("no JetStream metadata: %w", err))
		return env, &jetstream.MsgMetadata{}
	}
	env := s.decode(m.Subject(), md.Sequence.Stream, md.Timestamp, events.Header(m.Headers()), m.Data())
	return env, md
}

// decodeOwned decodes m into an envelope that shares no memory with m: for
// events that are kept, such as a thread actor's view, where a string that
// shares its payload would keep the whole message alive.
func (s *Store) decodeOwned(m jetstream.Msg) events.Envelope {
	var seq uint64
	var stored time.Time
	md, err := m.Metadata()
	if err == nil {
		seq, stored = md.Sequence.Stream, md.Timestamp
	}
	env := events.Decode(s.subj, m.Subject(), seq, stored, events.Header(m.Headers()), m.Data())
	if err != nil {
		env.Err = errors.Join(env.Err, fmt.Errorf("no JetStream metadata: %w", err))
	}
	return env
}

func (s *Store) decodeRaw(m *jetstream.RawStreamMsg) events.Envelope {
	return s.decode(m.Subject, m.Sequence, m.Time, events.Header(m.Header), m.Data)
}

// LastSeq implements [events.Reader].
func (s *Store) LastSeq(ctx context.Context, thread string, k events.Kind) (uint64, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return 0, err
	}
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	m, err := s.getMsg(ctx, s.threadStream(thread), msgGetRequest{LastFor: s.subj.Thread(thread, k)})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable(fmt.Sprintf("last seq of %s %s", thread, k), err)
	}
	return m.Sequence, nil
}

// Threads implements [events.Reader]: the threads with a posted subject,
// from each partition stream's per-subject state (paged by the client).
func (s *Store) Threads(ctx context.Context) ([]string, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var out []string
	for p := range s.streams {
		ths, err := s.partitionThreads(ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, ths...)
	}
	return out, nil
}

// PartitionThreads implements [events.PartitionReader].
func (s *Store) PartitionThreads(ctx context.Context, p int) ([]string, error) {
	if err := s.checkPartition(p); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return s.partitionThreads(ctx, p)
}

func (s *Store) partitionThreads(ctx context.Context, p int) ([]string, error) {
	info, err := s.streams[p].Info(ctx, jetstream.WithSubjectFilter(s.subj.PartitionAllOf(p, events.KindPosted)))
	if err != nil {
		return nil, unavailable("list threads", err)
	}
	out := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		if t, _, ok := s.subj.Parse(subj); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

func (s *Store) checkPartition(p int) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if p < 0 || p >= len(s.streams) {
		return fmt.Errorf("natsstore: %w: no partition %d of %d", events.ErrLayout, p, len(s.streams))
	}
	return nil
}

// msgGetRequest is the JetStream STREAM.MSG.GET request.
type msgGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
	// StartTime, with NextFor, asks for the first message on it stored at
	// or after that time.
	StartTime *time.Time `json:"start_time,omitempty"`
}

// getMsg reads one message. ErrMsgNotFound means none. A thread stream
// that allows direct reads (see directReads) is read with a direct get:
// its one server answers it after every write acked before, and the
// request skips the JetStream API's queue, which a post's reads of its
// thread's head wait in behind the runners' writes. Any other stream is
// read through its leader's STREAM.MSG.GET API: on a replicated stream a
// direct get may be answered by a follower that has not yet applied a
// write we were acked for, and the read-back after a lost ack must see it.
func (s *Store) getMsg(ctx context.Context, stream string, req msgGetRequest) (*jetstream.RawStreamMsg, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if s.direct && s.isThreadStream(stream) {
		return s.directGet(ctx, stream, body)
	}
	resp, err := s.nc.RequestWithContext(ctx, s.api.subject("STREAM.MSG.GET."+stream), body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Subject  string    `json:"subject"`
			Sequence uint64    `json:"seq"`
			Header   []byte    `json:"hdrs"`
			Data     []byte    `json:"data"`
			Time     time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil, fmt.Errorf("bad STREAM.MSG.GET response from %s: %w", stream, err)
	}
	if r.Error != nil {
		if r.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, jetstream.ErrMsgNotFound
		}
		return nil, r.Error
	}
	if r.Message == nil {
		return nil, fmt.Errorf("empty STREAM.MSG.GET response from %s", stream)
	}
	m := &jetstream.RawStreamMsg{Subject: r.Message.Subject, Sequence: r.Message.Sequence, Data: r.Message.Data, Time: r.Message.Time}
	if len(r.Message.Header) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(r.Message.Header); err != nil {
			return nil, fmt.Errorf("bad headers on %s seq %d: %w", stream, m.Sequence, err)
		}
	}
	return m, nil
}
