package natsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
)

// Store implements the read models' port.
var _ events.ReadModelStore = (*Store)(nil)

// OpenDurable implements [events.ReadModelStore] with [Store.Durable].
func (s *Store) OpenDurable(ctx context.Context, cfg events.DurableConfig) (events.DurableConsumer, error) {
	d, err := s.Durable(ctx, DurableConfig(cfg))
	if err != nil {
		return nil, portError(err)
	}
	return durablePort{d}, nil
}

// DurableState implements [events.ReadModelStore] with [Store.DurableInfo].
func (s *Store) DurableState(ctx context.Context, name string) (events.DurableInfo, error) {
	info, err := s.DurableInfo(ctx, name)
	return info, portError(err)
}

// OpenBucket implements [events.ReadModelStore] with [Store.Bucket].
func (s *Store) OpenBucket(ctx context.Context, name string, create bool) (events.KVBucket, error) {
	b, err := s.Bucket(ctx, name, create)
	if err != nil {
		return nil, portError(err)
	}
	return bucketPort{b}, nil
}

// portErr is an error of this package that also matches the port's
// sentinel of the same meaning, with the same message.
type portErr struct {
	err, sentinel error
}

func (e portErr) Error() string        { return e.err.Error() }
func (e portErr) Unwrap() error        { return e.err }
func (e portErr) Is(target error) bool { return target == e.sentinel }

// portError makes err match events.ErrNotFound or events.ErrUnsafeConfig
// where it matches this package's own.
func portError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound):
		return portErr{err, events.ErrNotFound}
	case errors.Is(err, ErrUnsafeConfig):
		return portErr{err, events.ErrUnsafeConfig}
	}
	return err
}

// durablePort is a Durable as an [events.DurableConsumer].
type durablePort struct{ d *Durable }

func (p durablePort) Fetch(ctx context.Context, max int, wait time.Duration) ([]events.Delivery, error) {
	ds, err := p.d.Fetch(ctx, max, wait)
	out := make([]events.Delivery, len(ds))
	for i, d := range ds {
		out[i] = events.Delivery{Env: d.Env, Delivered: d.Delivered, Token: d.msg}
	}
	return out, portError(err)
}

func (p durablePort) Ack(ctx context.Context, d events.Delivery) error {
	msg, ok := d.Token.(jetstream.Msg)
	if !ok || msg == nil {
		return fmt.Errorf("natsstore: ack of a delivery that %s did not fetch", p.d.Name())
	}
	return portError(p.d.Ack(ctx, Delivery{Env: d.Env, Delivered: d.Delivered, msg: msg}))
}

func (p durablePort) Reset(ctx context.Context, seq uint64) error {
	return portError(p.d.Reset(ctx, seq))
}

// bucketPort is a Bucket as an [events.KVBucket].
type bucketPort struct{ b *Bucket }

func (p bucketPort) Get(ctx context.Context, key string) (events.KVEntry, bool, error) {
	e, found, err := p.b.Get(ctx, key)
	return events.KVEntry(e), found, portError(err)
}

func (p bucketPort) GetMany(ctx context.Context, keys []string) ([]events.KVEntry, []bool, error) {
	es, found, err := p.b.GetMany(ctx, keys)
	out := make([]events.KVEntry, len(es))
	for i, e := range es {
		out[i] = events.KVEntry(e)
	}
	return out, found, portError(err)
}

func (p bucketPort) Put(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	r, err := p.b.Put(ctx, key, value, rev)
	return r, portError(err)
}

func (p bucketPort) PutMany(ctx context.Context, puts []events.KVPut) ([]uint64, []error) {
	in := make([]Put, len(puts))
	for i, q := range puts {
		in[i] = Put(q)
	}
	revs, errs := p.b.PutMany(ctx, in)
	for i := range errs {
		errs[i] = portError(errs[i])
	}
	return revs, errs
}

func (p bucketPort) Scan(ctx context.Context, filter string, fn func(events.KVEntry) error) error {
	return portError(p.b.Scan(ctx, filter, func(e Entry) error { return fn(events.KVEntry(e)) }))
}

func (p bucketPort) Purge(ctx context.Context, filter string) error {
	return portError(p.b.Purge(ctx, filter))
}
