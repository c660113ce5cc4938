package natsstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"artifactr/events"
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
	var envs []events.Envelope
	for {
		batch, pending, next, err := s.directBatch(ctx, filter, from)
		if err != nil {
			return nil, err
		}
		envs = append(envs, batch...)
		if pending == 0 || next <= from {
			return envs, nil
		}
		from = next
	}
}

// directBatch sends one batched direct get and reads its replies up to the
// end-of-batch marker. It returns the messages, how many more the server
// counted past them, and the sequence to continue from.
func (s *Store) directBatch(ctx context.Context, filter string, from uint64) ([]events.Envelope, uint64, uint64, error) {
	req, err := json.Marshal(struct {
		Seq      uint64 `json:"seq"`
		NextFor  string `json:"next_by_subj"`
		Batch    int    `json:"batch"`
		MaxBytes int    `json:"max_bytes"`
	}{from, filter, directBatch, directMaxBytes})
	if err != nil {
		return nil, 0, 0, err
	}
	inbox := s.nc.NewRespInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, 0, 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.PublishRequest("$JS.API.DIRECT.GET."+s.cfg.Stream, inbox, req); err != nil {
		return nil, 0, 0, err
	}
	var envs []events.Envelope
	next := from
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, 0, 0, err
		}
		if len(m.Data) == 0 && m.Header.Get(hdrStatus) != "" {
			switch code := m.Header.Get(hdrStatus); code {
			case "404": // nothing on filter from there
				return envs, 0, next, nil
			case "204": // end of batch
				pending, _ := strconv.ParseUint(m.Header.Get(hdrNumPending), 10, 64)
				return envs, pending, next, nil
			default:
				return nil, 0, 0, fmt.Errorf("direct get from %s: status %s %s", s.cfg.Stream, code, m.Header.Get(hdrDescr))
			}
		}
		seq, err := strconv.ParseUint(m.Header.Get(hdrSequence), 10, 64)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("direct get from %s: bad %s %q", s.cfg.Stream, hdrSequence, m.Header.Get(hdrSequence))
		}
		stored, _ := time.Parse(time.RFC3339Nano, m.Header.Get(hdrTimeStamp))
		subject := m.Header.Get(hdrSubject)
		h := m.Header
		for _, k := range []string{hdrStream, hdrSubject, hdrSequence, hdrTimeStamp, hdrNumPending, hdrLastSeq} {
			h.Del(k)
		}
		envs = append(envs, s.decode(subject, seq, stored, events.Header(h), m.Data))
		next = seq + 1
	}
}

// directReads reports whether c lets Load read with direct gets.
func directReads(c jetstream.StreamConfig) bool {
	return c.AllowDirect && c.Replicas == 1 && c.Mirror == nil
}
