package natsstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
)

// Bounds of one batched direct get.
const (
	directBatch    = 1000
	directMaxBytes = 8 << 20
)

// Headers of a direct get's replies.
const (
	hdrStatus     = "Status"
	hdrDescr      = "Description"
	hdrStream     = "Nats-Stream"
	hdrSubject    = "Nats-Subject"
	hdrSequence   = "Nats-Sequence"
	hdrTimeStamp  = "Nats-Time-Stamp"
	hdrNumPending = "Nats-Num-Pending"
	hdrLastSeq    = "Nats-Last-Sequence"
)

// directLoad reads every message on filter from sequence from with batched
// direct gets: a few requests and no consumer on the server, so a claim's
// load costs the server nothing per thread once it returns. It is used only
// on a single-replica stream, whose one server answers, so the read sees
// every write acked before it (a follower of a replicated stream might not).
func (s *Store) directLoad(ctx context.Context, filter string, from uint64) ([]events.Envelope, error) {
	return s.directLoadUpTo(ctx, s.deadline(ctx), filter, from, 0)
}

// directLoadUpTo is directLoad that stops past upTo, unless upTo is 0, and
// gives up at deadline.
func (s *Store) directLoadUpTo(ctx context.Context, deadline time.Time, filter string, from, upTo uint64) ([]events.Envelope, error) {
	var envs []events.Envelope
	for {
		batch, pending, next, err := s.directBatch(ctx, deadline, filter, from)
		if err != nil {
			return nil, err
		}
		for _, env := range batch {
			if upTo > 0 && env.Seq > upTo {
				return envs, nil
			}
			envs = append(envs, env)
		}
		if pending == 0 || next <= from {
			return envs, nil
		}
		from = next
	}
}

// LoadUpTo implements [events.BoundedLoader]. On a stream that allows
// direct reads it reads each of the thread's three subjects by its literal
// name, which the server finds through its per-subject index; a wildcard
// filter makes it scan every message stored after from. Each read is made
// after upTo was stored, so each holds every event up to it, and the events
// past upTo are left out: the result is the thread's log up to upTo exactly.
func (s *Store) LoadUpTo(ctx context.Context, thread string, from, upTo uint64) ([]events.Envelope, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if upTo == 0 {
		return s.Load(ctx, thread, from)
	}
	from = max(from, 1)
	if !s.direct {
		ctx, cancel := s.bound(ctx)
		defer cancel()
		// Read up to upTo, or to the thread's last event if upTo is on
		// another subject and the thread has none after it: either is
		// stored on the filter (see replay).
		last, err := events.ThreadLastSeq(ctx, s, thread)
		if err != nil {
			return nil, err
		}
		envs, err := s.replay(ctx, s.streams[s.subj.PartitionOf(thread)], s.subj.ThreadAll(thread), from, min(upTo, last))
		if err != nil {
			return nil, unavailable("load "+thread, err)
		}
		n := len(envs)
		for n > 0 && envs[n-1].Seq > upTo {
			n--
		}
		return envs[:n], nil
	}
	// No context per load: the reads share one deadline (see replyMux).
	deadline := s.deadline(ctx)
	var all []events.Envelope
	for _, k := range events.Kinds() {
		envs, err := s.directLoadUpTo(ctx, deadline, s.subj.Thread(thread, k), from, upTo)
		if err != nil {
			return nil, unavailable("load "+thread, err)
		}
		all = append(all, envs...)
	}
	slices.SortFunc(all, func(a, b events.Envelope) int { return cmp.Compare(a.Seq, b.Seq) })
	return all, nil
}

// directBatch sends one batched direct get and reads its replies up to the
// end-of-batch marker, waiting until deadline at the latest. It returns the
// messages, how many more the server counted past them, and the sequence to
// continue from.
func (s *Store) directBatch(ctx context.Context, deadline time.Time, filter string, from uint64) ([]events.Envelope, uint64, uint64, error) {
	p, err := s.filterPartition("direct get", filter)
	if err != nil {
		return nil, 0, 0, err
	}
	stream := s.streamName(p)
	req, err := json.Marshal(struct {
		Seq      uint64 `json:"seq"`
		NextFor  string `json:"next_by_subj"`
		Batch    int    `json:"batch"`
		MaxBytes int    `json:"max_bytes"`
	}{from, filter, directBatch, directMaxBytes})
	if err != nil {
		return nil, 0, 0, err
	}
	g, err := s.mux()
	if err != nil {
		return nil, 0, 0, err
	}
	msgs, err := g.request(ctx, &nats.Msg{Subject: s.api.subject("DIRECT.GET." + stream), Data: req}, time.Until(deadline), true)
	if err != nil {
		return nil, 0, 0, err
	}
	var envs []events.Envelope
	next := from
	for _, m := range msgs {
		if len(m.Data) == 0 && m.Header.Get(hdrStatus) != "" {
			switch code := m.Header.Get(hdrStatus); code {
			case "404": // nothing on filter from there
				return envs, 0, next, nil
			case "204": // end of batch
				pending, _ := strconv.ParseUint(m.Header.Get(hdrNumPending), 10, 64)
				return envs, pending, next, nil
			default:
				return nil, 0, 0, fmt.Errorf("direct get from %s: status %s %s", stream, code, m.Header.Get(hdrDescr))
			}
		}
		seq, err := strconv.ParseUint(m.Header.Get(hdrSequence), 10, 64)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("direct get from %s: bad %s %q", stream, hdrSequence, m.Header.Get(hdrSequence))
		}
		stored, _ := time.Parse(time.RFC3339Nano, m.Header.Get(hdrTimeStamp))
		subject := m.Header.Get(hdrSubject)
		next = seq + 1
		if s.subj.IsGuard(subject) {
			continue // no event (see events.KindGuard)
		}
		// Loaded events are kept (a claim's history): decode into memory
		// of their own, not the reply's.
		envs = append(envs, events.Decode(s.subj, subject, seq, stored, events.Header(storedHeader(m.Header)), m.Data))
	}
	return nil, 0, 0, fmt.Errorf("direct get from %s: replies ended without an end-of-batch", stream)
}

// directReads reports whether c lets Load read with direct gets.
func directReads(c jetstream.StreamConfig) bool {
	return c.AllowDirect && c.Replicas == 1 && c.Mirror == nil
}

// storedHeader strips the headers a direct get adds from h, leaving those
// stored with the message.
func storedHeader(h nats.Header) nats.Header {
	for _, k := range []string{hdrStream, hdrSubject, hdrSequence, hdrTimeStamp, hdrNumPending, hdrLastSeq} {
		h.Del(k)
	}
	return h
}

// directGet reads one message of stream with a direct get of body, a
// [msgGetRequest]. ErrMsgNotFound means none.
func (s *Store) directGet(ctx context.Context, stream string, body []byte) (*jetstream.RawStreamMsg, error) {
	m, err := s.nc.RequestWithContext(ctx, s.api.subject("DIRECT.GET."+stream), body)
	if err != nil {
		return nil, err
	}
	if code := m.Header.Get(hdrStatus); len(m.Data) == 0 && code != "" {
		if code == "404" {
			return nil, jetstream.ErrMsgNotFound
		}
		return nil, fmt.Errorf("direct get from %s: status %s %s", stream, code, m.Header.Get(hdrDescr))
	}
	seq, err := strconv.ParseUint(m.Header.Get(hdrSequence), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("direct get from %s: bad %s %q", stream, hdrSequence, m.Header.Get(hdrSequence))
	}
	stored, _ := time.Parse(time.RFC3339Nano, m.Header.Get(hdrTimeStamp))
	subject := m.Header.Get(hdrSubject)
	h := storedHeader(m.Header)
	if len(h) == 0 {
		h = nil
	}
	return &jetstream.RawStreamMsg{Subject: subject, Sequence: seq, Header: h, Data: m.Data, Time: stored}, nil
}

// isThreadStream reports whether stream is one of the store's partition
// streams.
func (s *Store) isThreadStream(stream string) bool {
	for p := range s.streams {
		if s.streamName(p) == stream {
			return true
		}
	}
	return false
}
