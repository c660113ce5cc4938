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

// LastStreamSeq implements [events.LogReader].
func (s *Store) LastStreamSeq(ctx context.Context) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return uint64(s.log.Len()), nil
}

// NextSeq implements [events.LogReader]. A log keeps every record, so the
// next event from from is from itself while it is stored.
func (s *Store) NextSeq(ctx context.Context, from uint64) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	from = max(from, 1)
	if from > uint64(s.log.Len()) {
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
	l := s.log
	l.mu.Lock()
	recs := l.recs // appends never change the records up to len
	l.mu.Unlock()
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
