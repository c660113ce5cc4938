package memstore

import (
	"context"
	"fmt"

	"github.com/artifactr/artifactr/events"
)

// Store implements the read models' port and the snapshot store, so that a
// read model (projections/summaries) and a claim's snapshot can be tested
// without a server. The durable consumers, buckets and snapshots live on
// the [Log], as a server keeps them across connections: every handle sees
// the same ones.
var (
	_ events.ReadModelStore = (*Store)(nil)
	_ events.SnapshotStore  = (*Store)(nil)
)

// readModels is the state of a log's read models. The log's mutex protects
// it; its maps are made on first use.
type readModels struct {
	durables map[string]*durable
	buckets  map[string]*bucket
	snaps    map[string][]byte
	gen      uint64 // names each durable's incarnations, so stale acks are known
}

// LastStreamSeq implements [events.LogReader]. With partitions it returns
// an error wrapping [events.ErrLayout], as natsstore does: each partition
// has its own sequences ([Store.LastPartitionSeq]).
func (s *Store) LastStreamSeq(ctx context.Context) (uint64, error) {
	if err := s.onePartition("last stream sequence"); err != nil {
		return 0, err
	}
	return s.LastPartitionSeq(ctx, 0)
}

// LastPartitionSeq returns the last sequence of partition p's stream.
func (s *Store) LastPartitionSeq(ctx context.Context, p int) (uint64, error) {
	if err := s.checkPartition(ctx, p); err != nil {
		return 0, err
	}
	return uint64(len(s.log.recs(s.partKey(p)))), nil
}

// NextSeq implements [events.LogReader]. A log keeps every record, so the
// next event from from is from itself while it is stored.
func (s *Store) NextSeq(ctx context.Context, from uint64) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if err := s.onePartition("next sequence"); err != nil {
		return 0, false, err
	}
	return s.NextPartitionSeq(ctx, 0, from)
}

// NextPartitionSeq implements [events.LogReader]: NextSeq within partition
// p's stream.
func (s *Store) NextPartitionSeq(ctx context.Context, p int, from uint64) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if p < 0 || p >= s.cfg.Subjects.PartitionCount() {
		return 0, false, fmt.Errorf("memstore: %w: no partition %d", events.ErrLayout, p)
	}
	from = max(from, 1)
	if from > uint64(len(s.log.recs(s.partKey(p)))) {
		return 0, false, nil
	}
	return from, true, nil
}

// Replay implements [events.LogReader]: it reads up to the log's last
// sequence when it was called, and returns that sequence.
func (s *Store) Replay(ctx context.Context, filter string, from uint64, fn func(events.Envelope) error) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	key, err := s.filterKey("replay", filter)
	if err != nil {
		return 0, err
	}
	recs := s.log.recs(key)
	last := uint64(len(recs))
	for i := max(from, 1); i <= last; i++ {
		r := recs[i-1]
		if !subjectMatch(filter, r.subject) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return last, err
		}
		if err := fn(s.decode(r)); err != nil {
			return last, err
		}
	}
	return last, nil
}

// validName reports whether name is a durable or bucket name:
// [A-Za-z0-9_-]+, as natsstore requires.
func validName(name string) bool {
	return name != "" && events.ValidateThreadID(name) == nil
}

// notFound returns an error wrapping [events.ErrNotFound].
func notFound(what, name string) error {
	return fmt.Errorf("memstore: %s %s: %w", what, name, events.ErrNotFound)
}
