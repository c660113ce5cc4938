package natsstore

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// Partition leases live in the lease bucket under events.PartitionKey, a
// key with a dot: the lease watch and UnexplainedLeases skip them, as they
// are neither a thread nor a session. Each carries a server-side TTL, like
// a lease with its own TTL, so a dead owner's key goes away by itself;
// liveness is read from its expiry by this store's clock.

var _ events.PartitionLeaser = (*Store)(nil)

// AcquirePartition implements [events.PartitionLeaser].
func (s *Store) AcquirePartition(ctx context.Context, p int, session, owner string, ttl time.Duration) (events.PartitionLease, error) {
	if err := events.CheckPartitionArgs(p, session, owner, ttl); err != nil {
		return events.PartitionLease{}, err
	}
	if err := checkSessionID(session); err != nil {
		return events.PartitionLease{}, err
	}
	if err := s.checkOpen(); err != nil {
		return events.PartitionLease{}, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	now := s.cfg.Now()
	cur, err := s.readPartition(ctx, p, now)
	if err != nil {
		return events.PartitionLease{}, err
	}
	if cur.Live && cur.Session != session {
		return events.PartitionLease{}, fmt.Errorf("%w: partition %d is held by %s (session %s) until %s",
			events.ErrPartitionBusy, p, cur.Owner, cur.Session, cur.Expires.UTC().Format(time.RFC3339Nano))
	}
	l, o := s.putPartition(ctx, events.PartitionLease{Partition: p, Session: session, Owner: owner, TTL: ttl, Revision: cur.Revision}, now)
	if o.refused != nil {
		return events.PartitionLease{}, fmt.Errorf("%w: partition %d taken by another while acquiring it: %w", events.ErrPartitionBusy, p, o.refused)
	}
	return l, o.err
}

// RenewPartition implements [events.PartitionLeaser]. It rewrites the
// value and its server-side TTL by compare-and-set on l.Revision.
func (s *Store) RenewPartition(ctx context.Context, l events.PartitionLease) (events.PartitionLease, error) {
	if err := events.CheckPartitionArgs(l.Partition, l.Session, l.Owner, l.TTL); err != nil {
		return events.PartitionLease{}, err
	}
	if err := s.checkOpen(); err != nil {
		return events.PartitionLease{}, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	nl, o := s.putPartition(ctx, l, s.cfg.Now())
	if o.refused != nil {
		return events.PartitionLease{}, fmt.Errorf("%w: partition %d of %s moved past revision %d: %w", events.ErrLeaseLost, l.Partition, l.Session, l.Revision, o.refused)
	}
	return nl, o.err
}

// putPartition writes l's value expecting l.Revision.
func (s *Store) putPartition(ctx context.Context, l events.PartitionLease, now time.Time) (events.PartitionLease, outcome) {
	exp := now.Add(l.TTL)
	data, err := proto.Marshal(&eventspb.Lease{Holder: l.Owner, ExpiresUnixNano: exp.UnixNano(), TtlMs: l.TTL.Milliseconds(), Session: l.Session})
	if err != nil {
		return events.PartitionLease{}, outcome{err: fmt.Errorf("natsstore: encode partition lease: %w", err)}
	}
	key := events.PartitionKey(l.Partition)
	o := s.publish(ctx, write{
		what:     fmt.Sprintf("write partition lease %s for %s expecting revision %d", key, l.Session, l.Revision),
		stream:   s.kvStream,
		subject:  s.kvPrefix + key,
		pub:      s.kvPut + key,
		data:     data,
		msgID:    key + ":" + nuid.Next(),
		after:    l.Revision,
		jsHeader: append(expectLast(l.Revision), msgTTL(serverTTL(l.TTL))...),
	})
	if o.refused != nil || o.err != nil {
		return events.PartitionLease{}, o
	}
	l.Revision, l.Expires, l.Live = o.ack.Seq, exp, true
	return l, o
}

// ReleasePartition implements [events.PartitionLeaser]: a KV delete by
// compare-and-set on l.Revision, whose marker expires after a while.
func (s *Store) ReleasePartition(ctx context.Context, l events.PartitionLease) error {
	if l.Partition < 0 {
		return fmt.Errorf("%w: partition %d is negative", events.ErrInvalidEvent, l.Partition)
	}
	if err := s.checkOpen(); err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	key := events.PartitionKey(l.Partition)
	o := s.publish(ctx, write{
		what:     fmt.Sprintf("delete partition lease %s of %s expecting revision %d", key, l.Session, l.Revision),
		stream:   s.kvStream,
		subject:  s.kvPrefix + key,
		pub:      s.kvPut + key,
		header:   nats.Header{headerKVOperation: {"DEL"}},
		msgID:    key + ":" + nuid.Next(),
		after:    l.Revision,
		jsHeader: append(expectLast(l.Revision), msgTTL(markerTTL)...),
	})
	if o.refused != nil {
		return fmt.Errorf("%w: partition %d of %s moved past revision %d: %w", events.ErrLeaseLost, l.Partition, l.Session, l.Revision, o.refused)
	}
	return o.err
}

// PartitionLeases implements [events.PartitionLeaser] with one direct get
// per partition: its cost grows with partitions, not threads.
func (s *Store) PartitionLeases(ctx context.Context, parts int) ([]events.PartitionLease, error) {
	if parts < 0 {
		return nil, fmt.Errorf("%w: %d partitions", events.ErrInvalidEvent, parts)
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	now := s.cfg.Now()
	out := make([]events.PartitionLease, parts)
	for p := range out {
		l, err := s.readPartition(ctx, p, now)
		if err != nil {
			return nil, err
		}
		out[p] = l
	}
	return out, nil
}

// readPartition reads p's lease; a free one has Session "" and the
// revision a write taking it must expect (a delete or expiry marker's).
func (s *Store) readPartition(ctx context.Context, p int, now time.Time) (events.PartitionLease, error) {
	key := events.PartitionKey(p)
	st, err := s.readKey(ctx, key, "")
	if err != nil {
		return events.PartitionLease{}, unavailable("read partition lease "+key, err)
	}
	l := events.PartitionLease{Partition: p, Revision: st.rev}
	if !st.held || st.lease.Session == "" {
		return l, nil // free, or a value no partition lease writes
	}
	l.Session, l.Owner, l.TTL, l.Expires = st.lease.Session, st.lease.Holder, st.lease.TTL, st.lease.Expires
	l.Live = st.live(now)
	return l, nil
}
