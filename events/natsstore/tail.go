package natsstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
)

// tailBatch is how many messages a tail keeps buffered.
const tailBatch = 256

// tailHeartbeat bounds how long a tail stays deaf when its consumer is lost
// (a restart, or the first-pull race on a cluster; see loadHeartbeat): the
// ordered consumer recreates itself after two missed heartbeats.
const tailHeartbeat = time.Second

// Tail implements [events.Reader] with an ordered consumer, which recreates
// itself after a reconnect or a gap, resuming after the last message Next
// returned. With partitions, filter must lie within one partition (such as
// <prefix>.<p>.> or a thread's subjects), and from is a sequence of that
// partition's stream; a filter across partitions returns an error wrapping
// [events.ErrLayout].
func (s *Store) Tail(ctx context.Context, filter string, from uint64) (events.Tail, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	st, err := s.filterStream("tail", filter)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if from == 0 {
		// New events: from after the stream's last message, read here,
		// rather than DeliverNewPolicy. The ordered consumer starts its
		// replacement, after a lost heartbeat, at the start sequence when
		// nothing was delivered yet: with DeliverNew that is 1, the whole
		// stream again. And no event stored between this read and the
		// consumer's creation is skipped.
		info, err := st.Info(ctx)
		if err != nil {
			return nil, unavailable("tail "+filter, err)
		}
		from = info.State.LastSeq + 1
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from}
	cons, err := st.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, unavailable("tail "+filter, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(tailBatch), jetstream.PullHeartbeat(tailHeartbeat))
	if err != nil {
		s.dropConsumer(cons)
		return nil, unavailable("tail "+filter, err)
	}
	return &tail{s: s, filter: filter, cons: cons, it: it}, nil
}

type tail struct {
	s      *Store
	filter string
	cons   jetstream.Consumer
	it     jetstream.MessagesContext
	once   sync.Once
	guard  uint64 // the last guard skipped; Next runs on one goroutine
}

// Next implements [events.Tail]. It returns [events.ErrClosed] once the tail
// is stopped or the store closed, and ctx's error when ctx ends first.
func (t *tail) Next(ctx context.Context) (events.Envelope, error) {
	for {
		m, err := t.it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return events.Envelope{}, ctx.Err()
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return events.Envelope{}, fmt.Errorf("natsstore: tail %s: %w", t.filter, events.ErrClosed)
			}
			return events.Envelope{}, unavailable("tail "+t.filter, err)
		}
		if t.s.subj.IsGuard(m.Subject()) { // a guard is no event
			if md, err := m.Metadata(); err == nil {
				t.guard = md.Sequence.Stream
			}
			continue
		}
		env := t.s.decodeOwned(m)
		env.GuardBefore = t.guard != 0 && t.guard == env.Seq-1
		return env, nil
	}
}

// Stop implements [events.Tail].
func (t *tail) Stop() {
	t.once.Do(func() {
		t.it.Stop()
		t.s.dropConsumer(t.cons)
	})
}
