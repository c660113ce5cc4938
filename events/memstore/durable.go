package memstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/artifactr/artifactr/events"
)

// Defaults of [events.DurableConfig], natsstore's.
const (
	DefaultDurableAckWait       = 30 * time.Second
	DefaultDurableMaxAckPending = 20_000
)

// durable is a durable consumer with an ack-all policy, as natsstore
// creates them. The log's mutex protects it.
type durable struct {
	cfg events.DurableConfig
	key string // the stream cfg.Filter is in
	gen uint64 // this incarnation: a Reset or a re-creation makes a new one
	// delivered is the stream sequence of the last first delivery; the
	// next one looks from delivered+1.
	delivered uint64
	ackFloor  uint64
	pending   map[uint64]*inflight // stream seq -> delivery awaiting its ack
}

// inflight is a delivery awaiting its ack.
type inflight struct {
	count uint64    // deliveries so far
	due   time.Time // when it is delivered again, by the log's clock
}

// token is a memstore delivery's [events.Delivery.Token].
type token struct {
	name string
	gen  uint64
	seq  uint64
}

// durableHandle is a reader's handle on a durable of a log.
type durableHandle struct {
	s    *Store
	name string
	id   string // its key in the log's durables: name and stream
}

// durableID is the key of durable name on stream key: as on JetStream, each
// partition's stream has consumers of its own, so one name may have one on
// each.
func durableID(name, key string) string { return key + "/" + name }

// OpenDurable implements [events.ReadModelStore]. An existing durable keeps
// its position and its AckWait and MaxAckPending, as a JetStream consumer
// does; only another filter is refused.
func (s *Store) OpenDurable(ctx context.Context, cfg events.DurableConfig) (events.DurableConsumer, error) {
	if !validName(cfg.Name) {
		return nil, fmt.Errorf("memstore: durable name %q is not [A-Za-z0-9_-]+", cfg.Name)
	}
	if cfg.Filter == "" {
		cfg.Filter = s.cfg.Subjects.All()
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = DefaultDurableAckWait
	}
	if cfg.MaxAckPending == 0 {
		cfg.MaxAckPending = DefaultDurableMaxAckPending
	}
	if cfg.AckWait < 0 || cfg.MaxAckPending < 0 {
		return nil, fmt.Errorf("memstore: durable %s: negative AckWait or MaxAckPending", cfg.Name)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key, err := s.filterKey("open durable "+cfg.Name, cfg.Filter)
	if err != nil {
		return nil, err
	}
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rm.durables == nil {
		l.rm.durables = make(map[string]*durable)
	}
	id := durableID(cfg.Name, key)
	d := l.rm.durables[id]
	if d == nil {
		l.rm.gen++
		d = &durable{cfg: cfg, key: key, gen: l.rm.gen, pending: make(map[uint64]*inflight)}
		l.rm.durables[id] = d
	}
	if d.cfg.Filter != cfg.Filter {
		return nil, fmt.Errorf("memstore: durable %s exists with filter %q, want %q; delete it to recreate it: %w",
			cfg.Name, d.cfg.Filter, cfg.Filter, events.ErrUnsafeConfig)
	}
	return &durableHandle{s: s, name: cfg.Name, id: id}, nil
}

// DurableState implements [events.ReadModelStore]: with partitions, of the
// first partition's stream that has a durable of that name, as natsstore.
func (s *Store) DurableState(ctx context.Context, name string) (events.DurableInfo, error) {
	for p := range s.cfg.Subjects.PartitionCount() {
		info, err := s.PartitionDurableState(ctx, p, name)
		if !errors.Is(err, events.ErrNotFound) {
			return info, err
		}
	}
	return events.DurableInfo{}, notFound("durable", name)
}

// PartitionDurableState implements [events.ReadModelStore].
func (s *Store) PartitionDurableState(ctx context.Context, p int, name string) (events.DurableInfo, error) {
	if err := ctx.Err(); err != nil {
		return events.DurableInfo{}, err
	}
	if p < 0 || p >= s.cfg.Subjects.PartitionCount() {
		return events.DurableInfo{}, fmt.Errorf("memstore: %w: no partition %d", events.ErrLayout, p)
	}
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.rm.durables[durableID(name, s.partKey(p))]
	if d == nil {
		return events.DurableInfo{}, notFound("durable", name)
	}
	info := events.DurableInfo{Name: name, NumAckPending: len(d.pending), AckFloor: d.ackFloor, Delivered: d.delivered}
	recs := l.streamLocked(d.key).recs
	for i := d.delivered; i < uint64(len(recs)); i++ {
		if subjectMatch(d.cfg.Filter, recs[i].subject) {
			info.NumPending++
		}
	}
	return info, nil
}

// DeleteDurable implements [events.ReadModelStore]: from every partition's
// stream.
func (s *Store) DeleteDurable(ctx context.Context, name string) error {
	for p := range s.cfg.Subjects.PartitionCount() {
		if err := s.DeletePartitionDurable(ctx, p, name); err != nil {
			return err
		}
	}
	return nil
}

// DeletePartitionDurable implements [events.ReadModelStore].
func (s *Store) DeletePartitionDurable(ctx context.Context, p int, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p < 0 || p >= s.cfg.Subjects.PartitionCount() {
		return fmt.Errorf("memstore: %w: no partition %d", events.ErrLayout, p)
	}
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.rm.durables, durableID(name, s.partKey(p)))
	return nil
}

// lookLocked returns the durable h reads, or an error wrapping
// [events.ErrNotFound] when it was deleted.
func (h *durableHandle) lookLocked() (*durable, error) {
	d := h.s.log.rm.durables[h.id]
	if d == nil {
		return nil, notFound("durable", h.name)
	}
	return d, nil
}

// Fetch implements [events.DurableConsumer]: redeliveries that are due come
// first, then new events, at most max in all. The ack wait counts on the
// log's clock (the server's); wait is a real duration, as it is for a
// server's fetch, so a due time on a test clock is seen by the next Fetch
// after the clock moved.
func (h *durableHandle) Fetch(ctx context.Context, max int, wait time.Duration) ([]events.Delivery, error) {
	if max < 1 {
		return nil, fmt.Errorf("memstore: durable %s: fetch of %d", h.name, max)
	}
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	l := h.s.log
	for {
		l.mu.Lock()
		d, err := h.lookLocked()
		if err != nil {
			l.mu.Unlock()
			return nil, err
		}
		out := h.takeLocked(d, max)
		notify, due := l.notify, d.nextDueLocked()
		now := l.now()
		l.mu.Unlock()
		if len(out) > 0 || timeout == nil {
			return out, nil
		}
		if err := waitFor(ctx, notify, due.Sub(now), !due.IsZero(), timeout); err != nil {
			if err == errWaited {
				timeout = nil // one last look, then return
				continue
			}
			return nil, err
		}
	}
}

// errWaited is waitFor's report that the fetch's wait passed.
var errWaited = fmt.Errorf("memstore: wait passed")

// waitFor waits for a write to the log (notify), a redelivery falling due
// in after (if due), the fetch's timeout, or ctx.
func waitFor(ctx context.Context, notify <-chan struct{}, after time.Duration, due bool, timeout <-chan time.Time) error {
	var redeliver <-chan time.Time
	if due {
		t := time.NewTimer(after)
		defer t.Stop()
		redeliver = t.C
	}
	select {
	case <-notify:
	case <-redeliver:
	case <-timeout:
		return errWaited
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// takeLocked delivers what is ready: the redeliveries that are due, in
// stream order, then new events while fewer than MaxAckPending await acks.
func (h *durableHandle) takeLocked(d *durable, max int) []events.Delivery {
	l := h.s.log
	recs := l.streamLocked(d.key).recs
	now := l.now()
	max = min(max, d.cfg.MaxAckPending)
	var out []events.Delivery
	deliver := func(seq uint64, f *inflight) {
		f.count++
		f.due = now.Add(d.cfg.AckWait)
		out = append(out, events.Delivery{Env: h.s.decode(recs[seq-1]), Delivered: f.count,
			Token: token{name: h.id, gen: d.gen, seq: seq}})
	}
	for _, seq := range slices.Sorted(maps.Keys(d.pending)) {
		if len(out) == max {
			return out
		}
		if f := d.pending[seq]; !f.due.After(now) {
			deliver(seq, f)
		}
	}
	for len(out) < max && len(d.pending) < d.cfg.MaxAckPending && d.delivered < uint64(len(recs)) {
		d.delivered++
		if subjectMatch(d.cfg.Filter, recs[d.delivered-1].subject) {
			f := &inflight{}
			d.pending[d.delivered] = f
			deliver(d.delivered, f)
		}
	}
	return out
}

// nextDueLocked returns when the first delivery awaiting an ack is due
// again, zero when none is.
func (d *durable) nextDueLocked() time.Time {
	var due time.Time
	for _, f := range d.pending {
		if due.IsZero() || f.due.Before(due) {
			due = f.due
		}
	}
	return due
}

// Ack implements [events.DurableConsumer]: it acknowledges dl and every
// delivery before it. An ack of a delivery made before a Reset is ignored,
// as the reset dropped it.
func (h *durableHandle) Ack(ctx context.Context, dl events.Delivery) error {
	tok, ok := dl.Token.(token)
	if !ok || tok.name != h.id {
		return fmt.Errorf("memstore: durable %s: ack of a delivery it did not make", h.name)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	l := h.s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	d, err := h.lookLocked()
	if err != nil {
		return err
	}
	if tok.gen != d.gen {
		return nil
	}
	for seq := range d.pending {
		if seq <= tok.seq {
			delete(d.pending, seq)
		}
	}
	d.ackFloor = max(d.ackFloor, tok.seq)
	if len(d.pending) == 0 {
		d.ackFloor = d.delivered // every delivery is acked, as the server counts
	}
	return nil
}

// Reset implements [events.DurableConsumer]: deliveries start again from
// seq (at least 1), and those awaiting an ack are dropped.
func (h *durableHandle) Reset(ctx context.Context, seq uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l := h.s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	d, err := h.lookLocked()
	if err != nil {
		return err
	}
	seq = max(seq, 1)
	l.rm.gen++
	d.gen = l.rm.gen
	d.delivered, d.ackFloor = seq-1, seq-1
	clear(d.pending)
	return nil
}
