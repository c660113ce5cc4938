package natsstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
)

// scanIdle is how long a scan waits for its next key before asking the
// stream leader whether it has them all.
const scanIdle = 50 * time.Millisecond

// putWindow bounds the writes bucket.PutMany keeps in flight.
const putWindow = 256

// bucket is a KV bucket holding a read model, such as the thread
// summaries: one value per key, written by compare-and-set on the key's
// revision so that two writers never overwrite each other unseen. Any NATS
// client reads it (`nats kv get <bucket> <key>`). It is safe for concurrent
// use. A key's Revision is the compare-and-set token of the next write: the
// key's last revision, which may be a delete marker's.
type bucket struct {
	s      *Store
	name   string
	stream jetstream.Stream // KV_<name>
	prefix string           // $KV.<name>.: the keys' stored subjects
	put    string           // where writes are published (prefix, or under the domain)
}

var _ events.KVBucket = (*bucket)(nil)

// OpenBucket implements [events.ReadModelStore]: it opens the read-model
// bucket name. With create it creates it when missing (history 1, file
// storage, the store's replicas); without, a missing bucket returns an
// error wrapping [events.ErrNotFound]. The lease bucket is refused: a read
// model needs its own.
func (s *Store) OpenBucket(ctx context.Context, name string, create bool) (events.KVBucket, error) {
	b, err := s.openBucket(ctx, name, create)
	if err != nil {
		return nil, err // not a nil *bucket in an interface
	}
	return b, nil
}

func (s *Store) openBucket(ctx context.Context, name string, create bool) (*bucket, error) {
	if !isToken(name) {
		return nil, fmt.Errorf("natsstore: bucket name %q is not [A-Za-z0-9_-]+", name)
	}
	if name == s.cfg.Bucket {
		return nil, fmt.Errorf("natsstore: bucket %s holds the leases; a read model needs its own", name)
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	_, err := s.js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if !create {
			return nil, fmt.Errorf("natsstore: bucket %s: %w", name, events.ErrNotFound)
		}
		_, err = s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      name,
			Description: "artifactr read model (rebuildable from the thread stream)",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    s.cfg.Replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			err = nil // created meanwhile
		}
	}
	if err != nil {
		return nil, unavailable("open bucket "+name, s.denied(err, s.createSubject("KV_"+name)))
	}
	st, err := s.js.Stream(ctx, "KV_"+name)
	if err != nil {
		return nil, unavailable("open bucket "+name, err)
	}
	return &bucket{s: s, name: name, stream: st, prefix: kvStored(name), put: s.api.kvPublish(name)}, nil
}

// DeleteBucket deletes the read-model bucket name and everything in it.
// Deleting one that does not exist is not an error.
func (s *Store) DeleteBucket(ctx context.Context, name string) error {
	if name == s.cfg.Bucket {
		return fmt.Errorf("natsstore: bucket %s holds the leases; refusing to delete it", name)
	}
	if err := s.checkOpen(); err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	err := s.js.DeleteKeyValue(ctx, name)
	if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return unavailable("delete bucket "+name, err)
	}
	return nil
}

// Get returns key's last value. found is false when the key has none
// (never written, deleted or purged); e.Revision is then still the
// token a Put must expect. It reads from the stream leader, so it sees every
// acknowledged write.
func (b *bucket) Get(ctx context.Context, key string) (e events.KVEntry, found bool, err error) {
	if !events.ValidKVKey(key) {
		return events.KVEntry{}, false, fmt.Errorf("natsstore: bucket %s: invalid key %q", b.name, key)
	}
	if err := b.s.checkOpen(); err != nil {
		return events.KVEntry{}, false, err
	}
	ctx, cancel := b.s.bound(ctx)
	defer cancel()
	m, err := b.s.getMsg(ctx, b.stream.CachedInfo().Config.Name, msgGetRequest{LastFor: b.prefix + key})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return events.KVEntry{Key: key}, false, nil
	}
	if err != nil {
		return events.KVEntry{}, false, unavailable(fmt.Sprintf("get %s from %s", key, b.name), err)
	}
	e = events.KVEntry{Key: key, Revision: m.Sequence}
	if m.Header.Get(headerKVOperation) != "" {
		return e, false, nil // a delete or purge marker
	}
	e.Value = m.Data
	return e, true, nil
}

// GetMany gets keys concurrently, at most 32 at a time, and returns their
// entries in the order of keys, and whether each has a value.
func (b *bucket) GetMany(ctx context.Context, keys []string) ([]events.KVEntry, []bool, error) {
	out := make([]events.KVEntry, len(keys))
	found := make([]bool, len(keys))
	errs := make([]error, len(keys))
	sem := make(chan struct{}, 32)
	done := make(chan struct{})
	for i, k := range keys {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; done <- struct{}{} }()
			out[i], found[i], errs[i] = b.Get(ctx, k)
		}()
	}
	for range keys {
		<-done
	}
	return out, found, errors.Join(errs...)
}

// Put writes value to key if rev is still the key's last revision, and
// returns the new revision. A refusal returns an error wrapping
// [events.ErrConflict]: nothing was written; read the key again.
func (b *bucket) Put(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	revs, errs := b.PutMany(ctx, []events.KVPut{{Key: key, Value: value, Revision: rev}})
	return revs[0], errs[0]
}

// PutMany makes every put, pipelined, each with its own compare-and-set,
// and returns each one's new revision or error, in the order of puts. A
// refused put's error wraps [events.ErrConflict]; any other error means its
// outcome is unknown (read the key again: CAS keeps a retry safe).
func (b *bucket) PutMany(ctx context.Context, puts []events.KVPut) ([]uint64, []error) {
	revs := make([]uint64, len(puts))
	errs := make([]error, len(puts))
	if err := b.s.checkOpen(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return revs, errs
	}
	ctx, cancel := b.s.bound(ctx)
	defer cancel()
	for start := 0; start < len(puts); start += putWindow {
		end := min(start+putWindow, len(puts))
		futures := make([]jetstream.PubAckFuture, end-start)
		for i := start; i < end; i++ {
			p := puts[i]
			if !events.ValidKVKey(p.Key) {
				errs[i] = fmt.Errorf("natsstore: bucket %s: invalid key %q", b.name, p.Key)
				continue
			}
			m := &nats.Msg{Subject: b.put + p.Key, Data: p.Value}
			f, err := b.s.js.PublishMsgAsync(m, jetstream.WithExpectLastSequencePerSubject(p.Revision))
			if err != nil {
				errs[i] = unavailable(fmt.Sprintf("put %s to %s", p.Key, b.name), err)
				continue
			}
			futures[i-start] = f
		}
		for i := start; i < end; i++ {
			f := futures[i-start]
			if f == nil {
				continue
			}
			select {
			case ack := <-f.Ok():
				revs[i] = ack.Sequence
			case err := <-f.Err():
				errs[i] = b.putError(puts[i], err)
			case <-ctx.Done():
				errs[i] = unavailable(fmt.Sprintf("put %s to %s", puts[i].Key, b.name), ctx.Err())
			}
		}
	}
	return revs, errs
}

// putError translates a refused compare-and-set (10071, or 10164 on a
// replicated stream) into events.ErrConflict, keeping the server's error.
func (b *bucket) putError(p events.KVPut, err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return fmt.Errorf("%w: %s in %s moved past revision %d: %w", events.ErrConflict, p.Key, b.name, p.Revision, err)
	}
	return unavailable(fmt.Sprintf("put %s to %s", p.Key, b.name), err)
}

// Scan calls fn with the last value of every key matching filter (a subject
// pattern over keys: "*" is every key of one token, ">" every key), in no
// set order, skipping deleted keys. It reads with one ordered consumer, so
// it costs one round trip per few thousand keys, not one per key.
func (b *bucket) Scan(ctx context.Context, filter string, fn func(events.KVEntry) error) error {
	if err := b.s.checkOpen(); err != nil {
		return err
	}
	// Read at least until the last write on filter as the stream leader
	// has it: the consumer's pending count alone may come from a follower
	// that lags (see Store.replay).
	target, err := b.lastWrite(ctx, filter)
	if err != nil || target == 0 {
		return err
	}
	cctx, cancel := b.s.bound(ctx)
	cons, err := b.stream.OrderedConsumer(cctx, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{b.prefix + filter},
		DeliverPolicy:     jetstream.DeliverLastPerSubjectPolicy,
		InactiveThreshold: loadInactive,
	})
	cancel()
	if err != nil {
		return unavailable("scan "+b.name, err)
	}
	defer func() {
		if info := cons.CachedInfo(); info != nil && !b.s.nc.IsClosed() {
			_ = b.s.nc.Publish(b.s.api.subject("CONSUMER.DELETE."+info.Stream+"."+info.Name), nil)
		}
	}()
	it, err := cons.Messages(jetstream.PullMaxMessages(loadBatch), jetstream.PullExpiry(2*loadHeartbeat), jetstream.PullHeartbeat(loadHeartbeat))
	if err != nil {
		return unavailable("scan "+b.name, err)
	}
	defer it.Stop()
	// The server's pending count can also stay one too high (a deleted
	// revision skipped before it was counted out), and then no delivery
	// ever says the scan is done. A watchdog asks the leader whenever the
	// scan made no progress for scanIdle, and ends it once everything up
	// to the leader's last write was delivered. It cancels Next's context
	// only to end the scan: a Next cut short by a timeout would leave the
	// ordered consumer's iterator in use mid-request.
	var seen atomic.Uint64 // the last stream sequence delivered
	var idleDone atomic.Bool
	nctx, ncancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ncancel()
	wg.Go(func() {
		t := time.NewTicker(scanIdle)
		defer t.Stop()
		prev := seen.Load()
		for {
			select {
			case <-nctx.Done():
				return
			case <-t.C:
			}
			cur := seen.Load()
			if cur != prev {
				prev = cur
				continue
			}
			if last, err := b.lastWrite(nctx, filter); err == nil && last <= cur {
				idleDone.Store(true)
				ncancel()
				return
			}
		}
	})
	for {
		m, err := it.Next(jetstream.NextContext(nctx))
		if err != nil {
			switch {
			case idleDone.Load():
				return nil
			case ctx.Err() != nil:
				return ctx.Err()
			}
			return unavailable("scan "+b.name, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("natsstore: scan %s: no JetStream metadata: %w", b.name, err)
		}
		seen.Store(md.Sequence.Stream)
		if m.Headers().Get(headerKVOperation) == "" {
			if err := fn(events.KVEntry{Key: m.Subject()[len(b.prefix):], Value: m.Data(), Revision: md.Sequence.Stream}); err != nil {
				return err
			}
		}
		// Past the target, the pending count is this consumer's view
		// of writes made during the scan: deliveries go in sequence
		// order, and a key rewritten meanwhile comes after the target.
		// But the server counts a rewritten key's deleted revision out
		// of it at once and the new one in only later (asynchronously),
		// so a 0 may be short: the leader's last write on filter, read
		// now, says whether the scan is done or how far to go.
		if md.Sequence.Stream >= target && md.NumPending == 0 {
			last, err := b.lastWrite(ctx, filter)
			if err != nil {
				return err
			}
			if last <= md.Sequence.Stream {
				return nil
			}
			target = last
		}
	}
}

// lastWrite returns the sequence of the last write on the keys matching
// filter, read from the stream leader; 0 when there is none.
func (b *bucket) lastWrite(ctx context.Context, filter string) (uint64, error) {
	ctx, cancel := b.s.bound(ctx)
	defer cancel()
	m, err := b.s.getMsg(ctx, b.stream.CachedInfo().Config.Name, msgGetRequest{LastFor: b.prefix + filter})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable("scan "+b.name, err)
	}
	return m.Sequence, nil
}

// Purge removes every value of the keys matching filter ("*" is every key
// of one token), leaving no marker: a purged key reads as never written, so
// the next Put expects revision 0.
func (b *bucket) Purge(ctx context.Context, filter string) error {
	if err := b.s.checkOpen(); err != nil {
		return err
	}
	ctx, cancel := b.s.bound(ctx)
	defer cancel()
	if err := b.stream.Purge(ctx, jetstream.WithPurgeSubject(b.prefix+filter)); err != nil {
		return unavailable("purge "+filter+" in "+b.name, err)
	}
	return nil
}
