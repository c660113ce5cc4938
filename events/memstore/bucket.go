package memstore

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/artifactr/artifactr/events"
)

// bucket is a read model's key-value bucket with history 1, as natsstore
// creates them: each key keeps its last value. The log's mutex protects it.
type bucket struct {
	name string
	seq  uint64 // the bucket's last revision: every write takes the next
	keys map[string]kvValue
}

type kvValue struct {
	value []byte
	rev   uint64
}

// bucketHandle is a reader's handle on a bucket of a log.
type bucketHandle struct {
	s *Store
	b *bucket
}

// OpenBucket implements [events.ReadModelStore].
func (s *Store) OpenBucket(ctx context.Context, name string, create bool) (events.KVBucket, error) {
	if !validName(name) {
		return nil, fmt.Errorf("memstore: bucket name %q is not [A-Za-z0-9_-]+", name)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.rm.buckets[name]
	if b == nil {
		if !create {
			return nil, notFound("bucket", name)
		}
		if l.rm.buckets == nil {
			l.rm.buckets = make(map[string]*bucket)
		}
		b = &bucket{name: name, keys: make(map[string]kvValue)}
		l.rm.buckets[name] = b
	}
	return &bucketHandle{s: s, b: b}, nil
}

func (h *bucketHandle) invalidKey(k string) error {
	return fmt.Errorf("memstore: bucket %s: invalid key %q", h.b.name, k)
}

// Get implements [events.KVBucket]. A key without a value reads with
// Revision 0: a purge leaves no marker.
func (h *bucketHandle) Get(ctx context.Context, key string) (events.KVEntry, bool, error) {
	if !events.ValidKVKey(key) {
		return events.KVEntry{}, false, h.invalidKey(key)
	}
	if err := ctx.Err(); err != nil {
		return events.KVEntry{}, false, err
	}
	l := h.s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := h.b.keys[key]
	if !ok {
		return events.KVEntry{Key: key}, false, nil
	}
	return events.KVEntry{Key: key, Value: slices.Clone(v.value), Revision: v.rev}, true, nil
}

// GetMany implements [events.KVBucket].
func (h *bucketHandle) GetMany(ctx context.Context, keys []string) ([]events.KVEntry, []bool, error) {
	out := make([]events.KVEntry, len(keys))
	found := make([]bool, len(keys))
	var err error
	for i, k := range keys {
		var e error
		if out[i], found[i], e = h.Get(ctx, k); e != nil && err == nil {
			err = e
		}
	}
	return out, found, err
}

// Put implements [events.KVBucket].
func (h *bucketHandle) Put(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	revs, errs := h.PutMany(ctx, []events.KVPut{{Key: key, Value: value, Revision: rev}})
	return revs[0], errs[0]
}

// PutMany implements [events.KVBucket]: each put in turn, each with its own
// compare-and-set.
func (h *bucketHandle) PutMany(ctx context.Context, puts []events.KVPut) ([]uint64, []error) {
	revs := make([]uint64, len(puts))
	errs := make([]error, len(puts))
	l := h.s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, p := range puts {
		revs[i], errs[i] = h.putLocked(ctx, p)
	}
	return revs, errs
}

func (h *bucketHandle) putLocked(ctx context.Context, p events.KVPut) (uint64, error) {
	if !events.ValidKVKey(p.Key) {
		return 0, h.invalidKey(p.Key)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	b := h.b
	if last := b.keys[p.Key].rev; last != p.Revision {
		return 0, fmt.Errorf("%w: memstore: %s in %s is at revision %d, not %d", events.ErrConflict, p.Key, b.name, last, p.Revision)
	}
	b.seq++
	b.keys[p.Key] = kvValue{value: slices.Clone(p.Value), rev: b.seq}
	return b.seq, nil
}

// Scan implements [events.KVBucket]: filter is a subject pattern over keys
// ("*" is every key of one token, ">" every key). It reads the keys as they
// are when it is called, in key order, and calls fn without the log's lock,
// so fn may write to the bucket.
func (h *bucketHandle) Scan(ctx context.Context, filter string, fn func(events.KVEntry) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l := h.s.log
	l.mu.Lock()
	var es []events.KVEntry
	for _, k := range slices.Sorted(maps.Keys(h.b.keys)) {
		if v := h.b.keys[k]; subjectMatch(filter, k) {
			es = append(es, events.KVEntry{Key: k, Value: slices.Clone(v.value), Revision: v.rev})
		}
	}
	l.mu.Unlock()
	for _, e := range es {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// Purge implements [events.KVBucket]: a purged key reads as never written,
// so the next Put expects revision 0.
func (h *bucketHandle) Purge(ctx context.Context, filter string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l := h.s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	maps.DeleteFunc(h.b.keys, func(k string, _ kvValue) bool { return subjectMatch(filter, k) })
	return nil
}
