package natsstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
)

// Defaults of [events.DurableConfig] in natsstore.
const (
	DefaultDurableAckWait       = 30 * time.Second
	DefaultDurableMaxAckPending = 20_000
)

// durable is a durable pull consumer whose position the server keeps across
// restarts of its readers: a read model resumes where it stopped. It is
// created with DeliverAllPolicy (a new read model starts from the first
// event) and AckAllPolicy: acking a delivery acks every delivery before it,
// which is what a reader that applies events in order means by an ack. A
// delivery's Token is its jetstream.Msg.
//
// Deliveries come in stream order, but after a lost delivery or a crash the
// server redelivers unacked messages after AckWait, behind newer ones. A
// reader that needs every event in order checks each sequence against the
// last it applied, and on a gap calls Reset to be served again from there.
// It is safe for concurrent use, but a reader that wants order should fetch
// from one goroutine.
type durable struct {
	s    *Store
	st   jetstream.Stream // the stream of the partition cfg.Filter is in
	cfg  events.DurableConfig
	cons jetstream.Consumer
	// guard is the last guard skipped, so that the event after it can
	// say so (events.Envelope.GuardBefore) across fetches. Fetches are
	// made one at a time.
	guard atomic.Uint64
}

var _ events.DurableConsumer = (*durable)(nil)

// OpenDurable implements [events.ReadModelStore]: it opens the durable
// consumer cfg.Name, creating it if need be; an existing one keeps its
// position. It returns an error wrapping [events.ErrUnsafeConfig] when a
// consumer of that name exists with another filter or ack policy, and one
// wrapping [events.ErrUnavailable] when the server cannot be reached.
// AckWait defaults to [DefaultDurableAckWait], MaxAckPending to
// [DefaultDurableMaxAckPending].
func (s *Store) OpenDurable(ctx context.Context, cfg events.DurableConfig) (events.DurableConsumer, error) {
	d, err := s.openDurable(ctx, cfg)
	if err != nil {
		return nil, err // not a nil *durable in an interface
	}
	return d, nil
}

func (s *Store) openDurable(ctx context.Context, cfg events.DurableConfig) (*durable, error) {
	if !isToken(cfg.Name) {
		return nil, fmt.Errorf("natsstore: durable name %q is not [A-Za-z0-9_-]+", cfg.Name)
	}
	if cfg.Filter == "" {
		cfg.Filter = s.subj.All()
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = DefaultDurableAckWait
	}
	if cfg.MaxAckPending == 0 {
		cfg.MaxAckPending = DefaultDurableMaxAckPending
	}
	if cfg.AckWait < 0 || cfg.MaxAckPending < 0 {
		return nil, fmt.Errorf("natsstore: durable %s: negative AckWait or MaxAckPending", cfg.Name)
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	// A consumer reads one stream: with partitions, one partition's.
	st, err := s.filterStream("open durable "+cfg.Name, cfg.Filter)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	cons, err := openDurable(ctx, st, jetstream.ConsumerConfig{
		Durable:       cfg.Name,
		Description:   "artifactr read model",
		FilterSubject: cfg.Filter,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckAllPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: cfg.MaxAckPending,
	})
	if err != nil {
		return nil, unavailable("open durable "+cfg.Name, err)
	}
	return &durable{s: s, st: st, cfg: cfg, cons: cons}, nil
}

// Fetch waits up to wait for a first event, then returns it with whatever
// else is ready, at most max in all, in delivery order. It returns no
// deliveries and no error when wait passes with nothing to deliver. An
// error wrapping [events.ErrUnavailable] means the fetch failed; its
// deliveries, if any, are lost to this reader and will be redelivered.
func (d *durable) Fetch(ctx context.Context, max int, wait time.Duration) ([]events.Delivery, error) {
	if err := d.s.checkOpen(); err != nil {
		return nil, err
	}
	max = min(max, d.cfg.MaxAckPending)
	if max < 1 {
		return nil, fmt.Errorf("natsstore: durable %s: fetch of %d", d.cfg.Name, max)
	}
	// First whatever is ready at once, which is all of it when catching up.
	out, err := d.collect(d.cons.FetchNoWait(max))
	if err != nil || len(out) > 0 || wait <= 0 {
		return out, err
	}
	// Then wait for one, and take what came with it.
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	first, err := d.collect(d.cons.Fetch(1, jetstream.FetchContext(wctx)))
	if err != nil || len(first) == 0 {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if max == 1 {
		return first, nil
	}
	rest, err := d.collect(d.cons.FetchNoWait(max - 1))
	return append(first, rest...), err
}

// collect drains a fetch into deliveries.
func (d *durable) collect(b jetstream.MessageBatch, err error) ([]events.Delivery, error) {
	if err != nil {
		return nil, unavailable("fetch from "+d.cfg.Name, err)
	}
	var out []events.Delivery
	for m := range b.Messages() {
		if d.s.subj.IsGuard(m.Subject()) {
			// No event (see events.KindGuard). Its event follows it, and
			// acking that one acks it too (ack-all).
			if md, err := m.Metadata(); err == nil {
				d.guard.Store(md.Sequence.Stream)
			}
			continue
		}
		env, md := d.s.decodeMsg(m)
		if g := d.guard.Load(); g != 0 && g == env.Seq-1 {
			env.GuardBefore = true
		}
		out = append(out, events.Delivery{Env: env, Delivered: md.NumDelivered, Token: m})
	}
	if err := b.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) &&
		!errors.Is(err, context.DeadlineExceeded) {
		return out, unavailable("fetch from "+d.cfg.Name, err)
	}
	return out, nil
}

// Ack acknowledges dl and, by the durable's ack-all policy, every delivery
// before it, and waits for the server to confirm.
func (d *durable) Ack(ctx context.Context, dl events.Delivery) error {
	msg, ok := dl.Token.(jetstream.Msg)
	if !ok || msg == nil {
		return fmt.Errorf("natsstore: durable %s: ack of a delivery it did not make", d.cfg.Name)
	}
	ctx, cancel := d.s.bound(ctx)
	defer cancel()
	if err := msg.DoubleAck(ctx); err != nil {
		return unavailable(fmt.Sprintf("ack %d on %s", dl.Env.Seq, d.cfg.Name), err)
	}
	return nil
}

// nak asks the server to deliver dl again at once. The port has no nak (a
// reader that needs an event again resets); the tests use it to force a
// redelivery.
func (d *durable) nak(dl events.Delivery) error {
	msg, ok := dl.Token.(jetstream.Msg)
	if !ok || msg == nil {
		return fmt.Errorf("natsstore: durable %s: nak of a delivery it did not make", d.cfg.Name)
	}
	if err := msg.Nak(); err != nil {
		return unavailable(fmt.Sprintf("nak %d on %s", dl.Env.Seq, d.cfg.Name), err)
	}
	return nil
}

// Reset makes the server deliver again from stream sequence seq (at least
// 1), dropping its record of deliveries awaiting an ack: the next fetch
// starts at seq, in order. Readers call it on a gap, and when they resume
// from a checkpoint of their own.
func (d *durable) Reset(ctx context.Context, seq uint64) error {
	ctx, cancel := d.s.bound(ctx)
	defer cancel()
	if _, err := d.st.ResetConsumerToSequence(ctx, d.cfg.Name, max(seq, 1)); err != nil {
		return unavailable(fmt.Sprintf("reset %s to %d", d.cfg.Name, seq), err)
	}
	return nil
}

// DurableState implements [events.ReadModelStore]: the state of the
// durable consumer name on the server, or an error wrapping
// [events.ErrNotFound] when there is none. With partitions it is the first
// partition's stream that has one of that name.
func (s *Store) DurableState(ctx context.Context, name string) (events.DurableInfo, error) {
	if err := s.checkOpen(); err != nil {
		return events.DurableInfo{}, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return s.durableState(ctx, s.streams, name)
}

// PartitionDurableState implements [events.ReadModelStore]: the state of
// the durable consumer name on partition p's stream.
func (s *Store) PartitionDurableState(ctx context.Context, p int, name string) (events.DurableInfo, error) {
	if err := s.checkOpen(); err != nil {
		return events.DurableInfo{}, err
	}
	if p < 0 || p >= len(s.streams) {
		return events.DurableInfo{}, fmt.Errorf("natsstore: %w: no partition %d of %d", events.ErrLayout, p, len(s.streams))
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return s.durableState(ctx, s.streams[p:p+1], name)
}

// durableState is the state of the first of streams' consumers named name.
func (s *Store) durableState(ctx context.Context, streams []jetstream.Stream, name string) (events.DurableInfo, error) {
	var c jetstream.Consumer
	var err error = jetstream.ErrConsumerNotFound
	for _, st := range streams {
		if c, err = st.Consumer(ctx, name); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			break
		}
	}
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return events.DurableInfo{}, fmt.Errorf("natsstore: durable %s: %w", name, events.ErrNotFound)
	}
	if err != nil {
		return events.DurableInfo{}, unavailable("durable "+name, err)
	}
	info := c.CachedInfo()
	return events.DurableInfo{
		Name:          name,
		NumPending:    info.NumPending,
		NumAckPending: info.NumAckPending,
		AckFloor:      info.AckFloor.Stream,
		Delivered:     info.Delivered.Stream,
	}, nil
}

// DeleteDurable deletes the durable consumer name, from every partition's
// stream. Deleting one that does not exist is not an error.
func (s *Store) DeleteDurable(ctx context.Context, name string) error {
	return s.deleteDurable(ctx, s.streams, name)
}

// DeletePartitionDurable implements [events.ReadModelStore]: DeleteDurable
// on partition p's stream alone.
func (s *Store) DeletePartitionDurable(ctx context.Context, p int, name string) error {
	if p < 0 || p >= len(s.streams) {
		return fmt.Errorf("natsstore: %w: no partition %d of %d", events.ErrLayout, p, len(s.streams))
	}
	return s.deleteDurable(ctx, s.streams[p:p+1], name)
}

func (s *Store) deleteDurable(ctx context.Context, streams []jetstream.Stream, name string) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	for _, st := range streams {
		err := st.DeleteConsumer(ctx, name)
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return unavailable("delete durable "+name, err)
		}
	}
	return nil
}
