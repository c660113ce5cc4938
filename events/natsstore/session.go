package natsstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// sessionPrefix starts the key of a runner session in the lease bucket. A
// thread id has no dot, so no thread's lease key can take this shape.
const sessionPrefix = "_session."

func sessionKey(id string) string { return sessionPrefix + id }

// OpenSession implements [events.SessionLeaser]. The session's key is new
// (a fresh nuid), so it is created by compare-and-set on revision 0, with a
// server-side TTL so a dead runner's session goes away by itself.
func (s *Store) OpenSession(ctx context.Context, owner string, ttl time.Duration) (events.Session, error) {
	if err := checkLeaseArgs(owner, ttl); err != nil {
		return events.Session{}, err
	}
	if err := s.checkOpen(); err != nil {
		return events.Session{}, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	id := nuid.Next()
	l, o := s.putSession(ctx, events.Session{ID: id, Owner: owner, TTL: ttl})
	if o.refused != nil {
		return events.Session{}, fmt.Errorf("natsstore: open session %s: %w", id, o.refused)
	}
	return l, o.err
}

// RenewSession implements [events.SessionLeaser].
func (s *Store) RenewSession(ctx context.Context, ss events.Session) (events.Session, error) {
	if err := checkLeaseArgs(ss.Owner, ss.TTL); err != nil {
		return events.Session{}, err
	}
	if err := checkSessionID(ss.ID); err != nil {
		return events.Session{}, err
	}
	if err := s.checkOpen(); err != nil {
		return events.Session{}, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	ns, o := s.putSession(ctx, ss)
	if o.refused != nil {
		return events.Session{}, fmt.Errorf("%w: session %s of %s moved past revision %d: %w", events.ErrLeaseLost, ss.ID, ss.Owner, ss.Revision, o.refused)
	}
	return ns, o.err
}

func (s *Store) putSession(ctx context.Context, ss events.Session) (events.Session, outcome) {
	now := s.cfg.Now()
	key := sessionKey(ss.ID)
	exp := now.Add(ss.TTL)
	data, err := proto.Marshal(&eventspb.Lease{Holder: ss.Owner, ExpiresUnixNano: exp.UnixNano(), TtlMs: ss.TTL.Milliseconds()})
	if err != nil {
		return events.Session{}, outcome{err: fmt.Errorf("natsstore: encode session: %w", err)}
	}
	o := s.publish(ctx, write{
		what:     fmt.Sprintf("write session %s of %s expecting revision %d", key, ss.Owner, ss.Revision),
		stream:   s.kvStream,
		subject:  s.kvPrefix + key,
		pub:      s.kvPut + key,
		data:     data,
		msgID:    key + ":" + nuid.Next(),
		after:    ss.Revision,
		jsHeader: append(expectLast(ss.Revision), msgTTL(serverTTL(ss.TTL))...),
	})
	if o.refused != nil || o.err != nil {
		return events.Session{}, o
	}
	ss.Revision, ss.Expires = o.ack.Seq, exp
	return ss, o
}

// CloseSession implements [events.SessionLeaser].
func (s *Store) CloseSession(ctx context.Context, ss events.Session) error {
	if err := checkSessionID(ss.ID); err != nil {
		return err
	}
	err := s.deleteKey(ctx, sessionKey(ss.ID), ss.Owner, ss.Revision)
	if err != nil && errors.Is(err, events.ErrLeaseLost) {
		return fmt.Errorf("%w: session %s", events.ErrLeaseLost, ss.ID)
	}
	return err
}

// AcquireSessionLease implements [events.SessionLeaser]. A thread never
// leased is taken by creating its key, with no read first; otherwise the
// key and the session it names are read, and a free lease is taken by
// compare-and-set on the key's revision. A lease already under ss is taken
// again: its runner asks only when it holds no claim on the thread (a claim
// that failed half way left it).
func (s *Store) AcquireSessionLease(ctx context.Context, thread, holder string, ss events.Session) (events.Lease, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return events.Lease{}, err
	}
	if err := checkLeaseArgs(holder, ss.TTL); err != nil {
		return events.Lease{}, err
	}
	if err := checkSessionID(ss.ID); err != nil {
		return events.Lease{}, err
	}
	if err := s.checkOpen(); err != nil {
		return events.Lease{}, err
	}
	now := s.cfg.Now()
	// publish bounds itself; the reads after a refusal need a bound.
	l, o := s.putLease(ctx, thread, holder, ss.TTL, ss.ID, 0, now)
	if o.refused == nil {
		l.Expires = ss.Expires
		return l, o.err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rev, reclaimed, err := s.freeRevision(ctx, thread, now, ss.ID)
	if err != nil {
		return events.Lease{}, err
	}
	l, o = s.putLease(ctx, thread, holder, ss.TTL, ss.ID, rev, now)
	if o.refused != nil {
		return events.Lease{}, fmt.Errorf("%w: lease of %s taken by another while acquiring it: %w", events.ErrThreadBusy, thread, o.refused)
	}
	l.Expires = ss.Expires
	l.Reclaimed = s.reclaimed(l, o.err, reclaimed)
	return l, o.err
}

func checkSessionID(id string) error {
	if id == "" || strings.ContainsAny(id, ".*> \t\r\n") {
		return fmt.Errorf("%w: bad session id %q", events.ErrInvalidEvent, id)
	}
	return nil
}

// WatchLeases implements [events.SessionLeaser] with a KV watch on the
// lease bucket: one ordered consumer, whatever the number of leases.
func (s *Store) WatchLeases(ctx context.Context) (events.LeaseWatch, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	bctx, cancel := s.bound(ctx)
	defer cancel()
	kv, err := s.js.KeyValue(bctx, s.cfg.Bucket)
	if err != nil {
		return nil, unavailable("open lease bucket "+s.cfg.Bucket, err)
	}
	// The watcher lives until Stop, not for the bound of its creation.
	w, err := kv.WatchAll(context.WithoutCancel(ctx))
	if err != nil {
		return nil, unavailable("watch leases", err)
	}
	return &leaseWatch{s: s, w: w}, nil
}

type leaseWatch struct {
	s    *Store
	w    jetstream.KeyWatcher
	once sync.Once
}

// Next implements [events.LeaseWatch]. Keys that are neither a valid thread
// id nor a session are skipped, as are values that do not decode (they hold
// nothing, as readLease treats them).
func (lw *leaseWatch) Next(ctx context.Context) (events.LeaseUpdate, error) {
	for {
		var e jetstream.KeyValueEntry
		var ok bool
		select {
		case e, ok = <-lw.w.Updates():
		case <-ctx.Done():
			return events.LeaseUpdate{}, ctx.Err()
		}
		if !ok {
			return events.LeaseUpdate{}, fmt.Errorf("natsstore: lease watch: %w", events.ErrClosed)
		}
		if e == nil {
			return events.LeaseUpdate{CaughtUp: true}, nil
		}
		if u, ok := lw.s.leaseUpdate(e); ok {
			return u, nil
		}
	}
}

func (s *Store) leaseUpdate(e jetstream.KeyValueEntry) (events.LeaseUpdate, bool) {
	u := events.LeaseUpdate{Revision: e.Revision(), Present: e.Operation() == jetstream.KeyValuePut}
	key := e.Key()
	if id, ok := strings.CutPrefix(key, sessionPrefix); ok {
		u.Session = id
	} else if events.ValidateThreadID(key) == nil {
		u.Thread = key
	} else {
		return u, false
	}
	if !u.Present {
		return u, true
	}
	var v eventspb.Lease
	if err := proto.Unmarshal(e.Value(), &v); err != nil {
		u.Present = false
		return u, true
	}
	u.Holder = v.GetHolder()
	if u.Thread != "" {
		u.Session = v.GetSession()
	}
	return u, true
}

// watchStopDrain bounds how long Stop waits for the watcher's callback to
// let go once unsubscribed; it returns at once unless the server floods it.
const watchStopDrain = 10 * time.Second

// Stop implements [events.LeaseWatch]. nats.go's watcher callback sends on
// the Updates channel (256 deep) under the watcher's lock, and the channel
// is closed only once the callback has returned. So a watch stopped while
// its channel is full would leave the callback blocked for good: Stop
// unsubscribes, then drains the channel until it is closed.
func (lw *leaseWatch) Stop() {
	lw.once.Do(func() {
		_ = lw.w.Stop()
		t := time.NewTimer(watchStopDrain)
		defer t.Stop()
		for {
			select {
			case _, ok := <-lw.w.Updates():
				if !ok {
					return
				}
			case <-t.C:
				lw.s.cfg.Logger.Warn("natsstore: lease watch still delivering after its stop", "waited", watchStopDrain)
				return
			}
		}
	})
}
