package natsstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
)

// DefaultSnapshotBucket is the KV bucket of thread snapshots.
const DefaultSnapshotBucket = "thread_snapshots"

var _ events.SnapshotStore = (*Store)(nil)

// snapshots is the snapshot bucket, created (when the store may) by New.
type snapshots struct {
	mu sync.Mutex // protects kv
	kv jetstream.KeyValue
}

// snapshotKV opens the bucket; create says whether to create it if missing.
// It returns nil and no error when it is missing and create is false.
func (s *Store) snapshotKV(ctx context.Context, create bool) (jetstream.KeyValue, error) {
	s.snaps.mu.Lock()
	defer s.snaps.mu.Unlock()
	if s.snaps.kv != nil {
		return s.snaps.kv, nil
	}
	kv, err := s.js.KeyValue(ctx, s.cfg.SnapshotBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if !create {
			return nil, nil
		}
		kv, err = s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      s.cfg.SnapshotBucket,
			Description: "artifactr thread snapshots: a cache of each thread's fold; a claim ignores a bad one",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    s.cfg.Replicas,
			MaxBytes:    -1,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = s.js.KeyValue(ctx, s.cfg.SnapshotBucket)
		}
	}
	if err != nil {
		return nil, err
	}
	s.snaps.kv = kv
	return kv, nil
}

// SaveSnapshot implements [events.SnapshotStore].
func (s *Store) SaveSnapshot(ctx context.Context, thread string, data []byte) error {
	if err := events.ValidateThreadID(thread); err != nil {
		return err
	}
	if err := s.checkOpen(); err != nil {
		return err
	}
	if len(data) > s.maxEvent {
		return fmt.Errorf("%w: snapshot of %s is %d bytes, more than %d", events.ErrTooLarge, thread, len(data), s.maxEvent)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	kv, err := s.snapshotKV(ctx, false)
	if err != nil {
		return unavailable("open snapshot bucket "+s.cfg.SnapshotBucket, err)
	}
	if kv == nil {
		return fmt.Errorf("natsstore: no snapshot bucket %s", s.cfg.SnapshotBucket)
	}
	if _, err := kv.Put(ctx, thread, data); err != nil {
		return unavailable("save snapshot of "+thread, err)
	}
	return nil
}

// LoadSnapshot implements [events.SnapshotStore].
func (s *Store) LoadSnapshot(ctx context.Context, thread string) ([]byte, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	kv, err := s.snapshotKV(ctx, false)
	if err != nil || kv == nil {
		return nil, unavailable("open snapshot bucket", err)
	}
	e, err := kv.Get(ctx, thread)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable("load snapshot of "+thread, err)
	}
	return e.Value(), nil
}
