package memstore

import (
	"context"
	"fmt"
	"time"

	"artifactr/events"
	"artifactr/events/eventspb"
)

// AcquireLease implements [events.Leaser]. A lease is free when it was never
// taken, was released, or has lapsed by this handle's clock.
func (s *Store) AcquireLease(ctx context.Context, thread, holder string, ttl time.Duration) (events.Lease, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return events.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return events.Lease{}, err
	}
	if f := s.fault("lease", thread); f != NoFault {
		return events.Lease{}, unavailable("lease acquire", FailBefore)
	}
	now := s.cfg.Now()
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.leases[thread]
	if cur != nil && !cur.deleted && time.Unix(0, cur.value.ExpiresUnixNano).After(now) {
		return events.Lease{}, fmt.Errorf("%w: %s is held by %s until %s", events.ErrThreadBusy, thread, cur.value.Holder,
			time.Unix(0, cur.value.ExpiresUnixNano).UTC().Format(time.RFC3339Nano))
	}
	return s.putLocked(thread, holder, ttl, now), nil
}

func (s *Store) putLocked(thread, holder string, ttl time.Duration, now time.Time) events.Lease {
	l := s.log
	l.leaseRev++
	exp := now.Add(ttl)
	l.leases[thread] = &lease{
		value: &eventspb.Lease{Holder: holder, ExpiresUnixNano: exp.UnixNano(), TtlMs: ttl.Milliseconds()},
		rev:   l.leaseRev,
	}
	return events.Lease{Thread: thread, Holder: holder, Revision: l.leaseRev, TTL: ttl, Expires: exp}
}

// RenewLease implements [events.Leaser].
func (s *Store) RenewLease(ctx context.Context, le events.Lease) (events.Lease, error) {
	if err := events.ValidateThreadID(le.Thread); err != nil {
		return events.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return events.Lease{}, err
	}
	if f := s.fault("lease", le.Thread); f != NoFault {
		return events.Lease{}, unavailable("lease renew", FailBefore)
	}
	now := s.cfg.Now()
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.leases[le.Thread]
	if cur == nil || cur.deleted || cur.rev != le.Revision {
		return events.Lease{}, fmt.Errorf("%w: %s revision %d is gone", events.ErrLeaseLost, le.Thread, le.Revision)
	}
	return s.putLocked(le.Thread, le.Holder, le.TTL, now), nil
}

// ReleaseLease implements [events.Leaser].
func (s *Store) ReleaseLease(ctx context.Context, le events.Lease) error {
	if err := events.ValidateThreadID(le.Thread); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.leases[le.Thread]
	if cur == nil || cur.deleted || cur.rev != le.Revision {
		return fmt.Errorf("%w: %s revision %d is gone", events.ErrLeaseLost, le.Thread, le.Revision)
	}
	l.leaseRev++
	l.leases[le.Thread] = &lease{value: cur.value, rev: l.leaseRev, deleted: true}
	return nil
}

// GetLease implements [events.Leaser].
func (s *Store) GetLease(ctx context.Context, thread string) (events.Lease, bool, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return events.Lease{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return events.Lease{}, false, err
	}
	now := s.cfg.Now()
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.leases[thread]
	if cur == nil || cur.deleted {
		return events.Lease{}, false, nil
	}
	exp := time.Unix(0, cur.value.ExpiresUnixNano)
	le := events.Lease{Thread: thread, Holder: cur.value.Holder, Revision: cur.rev,
		TTL: time.Duration(cur.value.TtlMs) * time.Millisecond, Expires: exp}
	return le, exp.After(now), nil
}
