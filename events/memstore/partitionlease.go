package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// The partition leases live in a map of their own: natsstore keeps them in
// the lease bucket under keys its lease watch skips, and so WatchLeases
// here never sees them either. They share the bucket's revisions.

// AcquirePartition implements [events.PartitionLeaser]. A lease is free
// when it was never taken, was released, has lapsed by this handle's
// clock, or is held under session already.
func (s *Store) AcquirePartition(ctx context.Context, p int, session, owner string, ttl time.Duration) (events.PartitionLease, error) {
	if err := events.CheckPartitionArgs(p, session, owner, ttl); err != nil {
		return events.PartitionLease{}, err
	}
	if err := ctx.Err(); err != nil {
		return events.PartitionLease{}, err
	}
	key := events.PartitionKey(p)
	if f := s.fault("lease", key); f != NoFault {
		return events.PartitionLease{}, unavailable("partition acquire", FailBefore)
	}
	now := s.cfg.Now()
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.parts[p]; cur != nil && !cur.deleted && cur.value.Session != session {
		if exp := time.Unix(0, cur.value.ExpiresUnixNano); exp.After(now) {
			return events.PartitionLease{}, fmt.Errorf("%w: partition %d is held by %s (session %s) until %s",
				events.ErrPartitionBusy, p, cur.value.Holder, cur.value.Session, exp.UTC().Format(time.RFC3339Nano))
		}
	}
	return l.putPartitionLocked(p, session, owner, ttl, now), nil
}

func (l *Log) putPartitionLocked(p int, session, owner string, ttl time.Duration, now time.Time) events.PartitionLease {
	if l.parts == nil {
		l.parts = map[int]*lease{}
	}
	l.leaseRev++
	exp := now.Add(ttl)
	l.parts[p] = &lease{
		value: &eventspb.Lease{Holder: owner, ExpiresUnixNano: exp.UnixNano(), TtlMs: ttl.Milliseconds(), Session: session},
		rev:   l.leaseRev,
	}
	return events.PartitionLease{Partition: p, Session: session, Owner: owner, Revision: l.leaseRev, TTL: ttl, Expires: exp, Live: true}
}

// RenewPartition implements [events.PartitionLeaser].
func (s *Store) RenewPartition(ctx context.Context, pl events.PartitionLease) (events.PartitionLease, error) {
	if err := events.CheckPartitionArgs(pl.Partition, pl.Session, pl.Owner, pl.TTL); err != nil {
		return events.PartitionLease{}, err
	}
	if err := ctx.Err(); err != nil {
		return events.PartitionLease{}, err
	}
	if f := s.fault("lease", events.PartitionKey(pl.Partition)); f != NoFault {
		return events.PartitionLease{}, unavailable("partition renew", FailBefore)
	}
	now := s.cfg.Now()
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.parts[pl.Partition]; cur == nil || cur.deleted || cur.rev != pl.Revision {
		return events.PartitionLease{}, fmt.Errorf("%w: partition %d revision %d is gone", events.ErrLeaseLost, pl.Partition, pl.Revision)
	}
	return l.putPartitionLocked(pl.Partition, pl.Session, pl.Owner, pl.TTL, now), nil
}

// ReleasePartition implements [events.PartitionLeaser].
func (s *Store) ReleasePartition(ctx context.Context, pl events.PartitionLease) error {
	if pl.Partition < 0 {
		return fmt.Errorf("%w: partition %d is negative", events.ErrInvalidEvent, pl.Partition)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if f := s.fault("lease", events.PartitionKey(pl.Partition)); f != NoFault {
		return unavailable("partition release", FailBefore)
	}
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.parts[pl.Partition]
	if cur == nil || cur.deleted || cur.rev != pl.Revision {
		return fmt.Errorf("%w: partition %d revision %d is gone", events.ErrLeaseLost, pl.Partition, pl.Revision)
	}
	l.leaseRev++
	l.parts[pl.Partition] = &lease{value: cur.value, rev: l.leaseRev, deleted: true}
	return nil
}

// PartitionLeases implements [events.PartitionLeaser].
func (s *Store) PartitionLeases(ctx context.Context, parts int) ([]events.PartitionLease, error) {
	if parts < 0 {
		return nil, fmt.Errorf("%w: %d partitions", events.ErrInvalidEvent, parts)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]events.PartitionLease, parts)
	for p := range out {
		out[p].Partition = p
		cur := l.parts[p]
		if cur == nil {
			continue
		}
		out[p].Revision = cur.rev
		if cur.deleted {
			continue
		}
		v := cur.value
		exp := time.Unix(0, v.ExpiresUnixNano)
		out[p].Session, out[p].Owner, out[p].Expires = v.Session, v.Holder, exp
		out[p].TTL = time.Duration(v.TtlMs) * time.Millisecond
		out[p].Live = exp.After(now)
	}
	return out, nil
}

var _ events.PartitionLeaser = (*Store)(nil)
