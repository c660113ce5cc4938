package memstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// sessionPrefix starts a session's key, as in natsstore: no thread id has a
// dot.
const sessionPrefix = "_session."

// leaseFeed is the lease bucket's change feed, for watches. Its zero value
// is ready; the log's mutex protects it.
type leaseFeed struct {
	changes []events.LeaseUpdate
	notify  chan struct{} // closed and replaced on every change
	nextID  uint64        // names sessions
}

// changedLocked records the current state of key for watchers.
func (l *Log) changedLocked(key string) {
	f := &l.feed
	f.changes = append(f.changes, l.updateLocked(key))
	if f.notify != nil {
		close(f.notify)
	}
	f.notify = make(chan struct{})
}

func (l *Log) updateLocked(key string) events.LeaseUpdate {
	cur := l.leases[key]
	u := events.LeaseUpdate{}
	if id, ok := strings.CutPrefix(key, sessionPrefix); ok {
		u.Session = id
	} else {
		u.Thread = key
	}
	if cur == nil {
		return u
	}
	u.Revision = cur.rev
	if cur.deleted {
		return u
	}
	u.Present, u.Holder = true, cur.value.Holder
	if u.Thread != "" {
		u.Session = cur.value.Session
	}
	return u
}

// AcquireLease implements [events.Leaser]. A lease is free when it was never
// taken, was released, or has lapsed by this handle's clock.
func (s *Store) AcquireLease(ctx context.Context, thread, holder string, ttl time.Duration) (events.Lease, error) {
	return s.acquire(ctx, thread, holder, ttl, "")
}

// AcquireSessionLease implements [events.SessionLeaser].
func (s *Store) AcquireSessionLease(ctx context.Context, thread, holder string, ss events.Session) (events.Lease, error) {
	if ss.ID == "" {
		return events.Lease{}, fmt.Errorf("%w: lease without a session", events.ErrInvalidEvent)
	}
	return s.acquire(ctx, thread, holder, ss.TTL, ss.ID)
}

func (s *Store) acquire(ctx context.Context, thread, holder string, ttl time.Duration, session string) (events.Lease, error) {
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
	if cur := l.leases[thread]; cur != nil && !cur.deleted && (session == "" || cur.value.Session != session) {
		if exp, live := l.liveLocked(cur, now); live {
			return events.Lease{}, fmt.Errorf("%w: %s is held by %s until %s", events.ErrThreadBusy, thread, cur.value.Holder,
				exp.UTC().Format(time.RFC3339Nano))
		}
	}
	return s.putLocked(thread, holder, ttl, session, now), nil
}

// liveLocked returns when cur lapses, by its own expiry or its session's,
// and whether that is after now.
func (l *Log) liveLocked(cur *lease, now time.Time) (time.Time, bool) {
	v := cur.value
	if v.Session != "" {
		ss := l.leases[sessionPrefix+v.Session]
		if ss == nil || ss.deleted {
			return time.Time{}, false
		}
		v = ss.value
	}
	exp := time.Unix(0, v.ExpiresUnixNano)
	return exp, exp.After(now)
}

func (s *Store) putLocked(thread, holder string, ttl time.Duration, session string, now time.Time) events.Lease {
	l := s.log
	l.leaseRev++
	exp := now.Add(ttl)
	l.leases[thread] = &lease{
		value: &eventspb.Lease{Holder: holder, ExpiresUnixNano: exp.UnixNano(), TtlMs: ttl.Milliseconds(), Session: session},
		rev:   l.leaseRev,
	}
	l.changedLocked(thread)
	return events.Lease{Thread: thread, Holder: holder, Revision: l.leaseRev, TTL: ttl, Expires: exp, Session: session}
}

// RenewLease implements [events.Leaser].
func (s *Store) RenewLease(ctx context.Context, le events.Lease) (events.Lease, error) {
	if err := events.ValidateThreadID(le.Thread); err != nil {
		return events.Lease{}, err
	}
	return s.renew(ctx, le.Thread, le)
}

func (s *Store) renew(ctx context.Context, key string, le events.Lease) (events.Lease, error) {
	if err := ctx.Err(); err != nil {
		return events.Lease{}, err
	}
	if f := s.fault("lease", key); f != NoFault {
		return events.Lease{}, unavailable("lease renew", FailBefore)
	}
	now := s.cfg.Now()
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.leases[key]
	if cur == nil || cur.deleted || cur.rev != le.Revision {
		return events.Lease{}, fmt.Errorf("%w: %s revision %d is gone", events.ErrLeaseLost, key, le.Revision)
	}
	nl := s.putLocked(key, le.Holder, le.TTL, le.Session, now)
	nl.Thread = le.Thread
	return nl, nil
}

// ReleaseLease implements [events.Leaser].
func (s *Store) ReleaseLease(ctx context.Context, le events.Lease) error {
	if err := events.ValidateThreadID(le.Thread); err != nil {
		return err
	}
	return s.remove(ctx, le.Thread, le.Revision)
}

func (s *Store) remove(ctx context.Context, key string, rev uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.removeLocked(key, rev)
}

func (l *Log) removeLocked(key string, rev uint64) error {
	cur := l.leases[key]
	if cur == nil || cur.deleted || cur.rev != rev {
		return fmt.Errorf("%w: %s revision %d is gone", events.ErrLeaseLost, key, rev)
	}
	l.leaseRev++
	l.leases[key] = &lease{value: cur.value, rev: l.leaseRev, deleted: true}
	l.changedLocked(key)
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
	exp, live := l.liveLocked(cur, now)
	le := events.Lease{Thread: thread, Holder: cur.value.Holder, Revision: cur.rev,
		TTL: time.Duration(cur.value.TtlMs) * time.Millisecond, Expires: exp, Session: cur.value.Session}
	return le, live, nil
}

// OpenSession implements [events.SessionLeaser]. Like the server's per-key
// TTL, a timer on the log's clock removes the session when it is not
// renewed in time, so watchers see it lapse.
func (s *Store) OpenSession(ctx context.Context, owner string, ttl time.Duration) (events.Session, error) {
	if owner == "" || ttl <= 0 {
		return events.Session{}, fmt.Errorf("%w: session needs an owner and a positive TTL", events.ErrInvalidEvent)
	}
	if err := ctx.Err(); err != nil {
		return events.Session{}, err
	}
	l := s.log
	l.mu.Lock()
	l.feed.nextID++
	rnd := newID
	if l.cfg.SessionID != nil {
		rnd = l.cfg.SessionID
	}
	id := fmt.Sprintf("s%d-%s", l.feed.nextID, rnd())
	l.mu.Unlock()
	return s.putSession(ctx, events.Session{ID: id, Owner: owner, TTL: ttl}, true)
}

// RenewSession implements [events.SessionLeaser].
func (s *Store) RenewSession(ctx context.Context, ss events.Session) (events.Session, error) {
	return s.putSession(ctx, ss, false)
}

func (s *Store) putSession(ctx context.Context, ss events.Session, create bool) (events.Session, error) {
	if err := ctx.Err(); err != nil {
		return events.Session{}, err
	}
	key := sessionPrefix + ss.ID
	if f := s.fault("lease", key); f != NoFault {
		return events.Session{}, unavailable("session write", FailBefore)
	}
	now := s.cfg.Now()
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.leases[key]
	if !create && (cur == nil || cur.deleted || cur.rev != ss.Revision) {
		return events.Session{}, fmt.Errorf("%w: session %s revision %d is gone", events.ErrLeaseLost, ss.ID, ss.Revision)
	}
	nl := s.putLocked(key, ss.Owner, ss.TTL, "", now)
	ss.Revision, ss.Expires = nl.Revision, nl.Expires
	rev := nl.Revision
	l.cfg.AfterFunc(serverTTL(ss.TTL), func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if cur := l.leases[key]; cur != nil && cur.rev == rev {
			_ = l.removeLocked(key, rev)
		}
	})
	return ss, nil
}

// serverTTL is the expiry the JetStream store's server applies: whole
// seconds, rounded up.
func serverTTL(ttl time.Duration) time.Duration {
	secs := (ttl + time.Second - 1) / time.Second
	return max(secs, 1) * time.Second
}

// CloseSession implements [events.SessionLeaser].
func (s *Store) CloseSession(ctx context.Context, ss events.Session) error {
	return s.remove(ctx, sessionPrefix+ss.ID, ss.Revision)
}

// WatchLeases implements [events.SessionLeaser].
func (s *Store) WatchLeases(ctx context.Context) (events.LeaseWatch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	w := &leaseWatch{l: l, next: len(l.feed.changes), stop: make(chan struct{})}
	// In key order, so a simulation on one seed replays exactly.
	for _, key := range slices.Sorted(maps.Keys(l.leases)) {
		if !l.leases[key].deleted {
			w.initial = append(w.initial, l.updateLocked(key))
		}
	}
	w.initial = append(w.initial, events.LeaseUpdate{CaughtUp: true})
	return w, nil
}

type leaseWatch struct {
	l       *Log
	initial []events.LeaseUpdate
	next    int // index of the next change to deliver
	stop    chan struct{}
	once    sync.Once
}

// Next implements [events.LeaseWatch].
func (w *leaseWatch) Next(ctx context.Context) (events.LeaseUpdate, error) {
	if len(w.initial) > 0 {
		u := w.initial[0]
		w.initial = w.initial[1:]
		return u, nil
	}
	for {
		w.l.mu.Lock()
		if w.next < len(w.l.feed.changes) {
			u := w.l.feed.changes[w.next]
			w.next++
			w.l.mu.Unlock()
			return u, nil
		}
		if w.l.feed.notify == nil {
			w.l.feed.notify = make(chan struct{})
		}
		ch := w.l.feed.notify
		w.l.mu.Unlock()
		select {
		case <-ch:
		case <-w.stop:
			return events.LeaseUpdate{}, fmt.Errorf("memstore: lease watch: %w", events.ErrClosed)
		case <-ctx.Done():
			return events.LeaseUpdate{}, ctx.Err()
		}
	}
}

// Stop implements [events.LeaseWatch].
func (w *leaseWatch) Stop() { w.once.Do(func() { close(w.stop) }) }
