package memstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/artifactr/artifactr/events"
)

// MaxSnapshotChunks bounds a snapshot, as natsstore does: at most this many
// times the handle's MaxEventBytes.
const MaxSnapshotChunks = 256

// SaveSnapshot implements [events.SnapshotStore]. It refuses a snapshot
// larger than [MaxSnapshotChunks] times MaxEventBytes with an error
// wrapping [events.ErrTooLarge].
func (s *Store) SaveSnapshot(ctx context.Context, thread string, data []byte) error {
	if err := events.ValidateThreadID(thread); err != nil {
		return err
	}
	if limit := MaxSnapshotChunks * s.cfg.MaxEventBytes; len(data) > limit {
		return fmt.Errorf("%w: memstore: snapshot of %s is %d bytes, more than %d", events.ErrTooLarge, thread, len(data), limit)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rm.snaps == nil {
		l.rm.snaps = make(map[string][]byte)
	}
	l.rm.snaps[thread] = slices.Clone(data)
	return nil
}

// LoadSnapshot implements [events.SnapshotStore].
func (s *Store) LoadSnapshot(ctx context.Context, thread string) ([]byte, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.rm.snaps[thread]), nil
}
