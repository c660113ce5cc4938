package natsstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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
	if len(data) > maxSnapshotChunks*s.maxEvent {
		return fmt.Errorf("%w: snapshot of %s is %d bytes, more than %d chunks of %d", events.ErrTooLarge, thread, len(data), maxSnapshotChunks, s.maxEvent)
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
	if len(data) <= s.maxEvent {
		if _, err := kv.Put(ctx, thread, data); err != nil {
			return unavailable("save snapshot of "+thread, err)
		}
		return nil
	}
	// Chunked: the chunks first, then the manifest under the thread's key,
	// so a reader never sees a manifest before its chunks. A reader racing
	// a newer save may mix chunks; the snapshot's digest then fails and
	// the claim replays instead.
	n := (len(data) + s.maxEvent - 1) / s.maxEvent
	for i := range n {
		chunk := data[i*s.maxEvent : min(len(data), (i+1)*s.maxEvent)]
		if _, err := kv.Put(ctx, chunkKey(thread, i), chunk); err != nil {
			return unavailable(fmt.Sprintf("save chunk %d of %d of the snapshot of %s", i+1, n, thread), err)
		}
	}
	man, _ := json.Marshal(snapshotManifest{Chunks: n, Bytes: len(data)})
	if _, err := kv.Put(ctx, thread, man); err != nil {
		return unavailable("save the snapshot manifest of "+thread, err)
	}
	return nil
}

// maxSnapshotChunks bounds a chunked snapshot: 256 chunks of an event's
// size limit.
const maxSnapshotChunks = 256

// snapshotManifest is the value of a thread's snapshot key when its
// snapshot is too large for one value: it is in Chunks keys
// <thread>.c<i>, Bytes in all.
type snapshotManifest struct {
	Chunks int `json:"artifactr_snapshot_chunks"`
	Bytes  int `json:"bytes"`
}

func chunkKey(thread string, i int) string { return thread + ".c" + strconv.Itoa(i) }

// manifestOf returns the manifest v is, if it is one.
func manifestOf(v []byte) (snapshotManifest, bool) {
	var m snapshotManifest
	if !bytes.HasPrefix(v, []byte(`{"artifactr_snapshot_chunks":`)) || json.Unmarshal(v, &m) != nil || m.Chunks <= 0 || m.Chunks > maxSnapshotChunks {
		return m, false
	}
	return m, true
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
	m, chunked := manifestOf(e.Value())
	if !chunked {
		return e.Value(), nil
	}
	data := make([]byte, 0, m.Bytes)
	for i := range m.Chunks {
		c, err := kv.Get(ctx, chunkKey(thread, i))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, nil // a cache: a snapshot with a chunk missing is none
		}
		if err != nil {
			return nil, unavailable(fmt.Sprintf("load chunk %d of %d of the snapshot of %s", i+1, m.Chunks, thread), err)
		}
		data = append(data, c.Value()...)
	}
	if len(data) != m.Bytes {
		return nil, nil // chunks of another save: the claim replays instead
	}
	return data, nil
}
