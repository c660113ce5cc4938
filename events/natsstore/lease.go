package natsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// Headers the bucket's stream uses for deletes and for expiry markers.
const (
	headerKVOperation  = "KV-Operation"
	headerMarkerReason = "Nats-Marker-Reason"
)

// leaseState is what the last message on a lease key says.
type leaseState struct {
	rev   uint64       // the key's last sequence on the bucket stream; 0: none
	lease events.Lease // set when the last message is a lease value
	held  bool         // a lease value, lapsed or not
}

// live reports whether the lease is held and not lapsed by now.
func (st leaseState) live(now time.Time) bool {
	return st.held && st.lease.Expires.After(now)
}

// readLease reads a lease key's last message on the bucket's stream. Unlike
// kv.Get it also sees delete, purge and TTL-expiry markers, whose sequence
// is the revision the next write must expect.
func (s *Store) readLease(ctx context.Context, thread string) (leaseState, error) {
	return s.readKey(ctx, thread, thread)
}

// readKey reads the lease or session value under key; thread names the
// Lease it returns.
func (s *Store) readKey(ctx context.Context, key, thread string) (leaseState, error) {
	m, err := s.getMsg(ctx, s.kvStream, msgGetRequest{LastFor: s.kvPrefix + key})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return leaseState{}, nil
	}
	if err != nil {
		return leaseState{}, err
	}
	st := leaseState{rev: m.Sequence}
	if m.Header.Get(headerKVOperation) != "" || m.Header.Get(headerMarkerReason) != "" {
		return st, nil // deleted, purged or expired
	}
	var v eventspb.Lease
	if err := proto.Unmarshal(m.Data, &v); err != nil {
		// A value we cannot read holds nothing; the next write replaces it.
		s.cfg.Logger.Warn("natsstore: undecodable lease value; treating the lease as free",
			"key", key, "revision", m.Sequence, "error", err)
		return st, nil
	}
	st.held = true
	st.lease = events.Lease{
		Thread:   thread,
		Holder:   v.GetHolder(),
		Revision: m.Sequence,
		TTL:      time.Duration(v.GetTtlMs()) * time.Millisecond,
		Expires:  time.Unix(0, v.GetExpiresUnixNano()),
		Session:  v.GetSession(),
	}
	return st, nil
}

// liveNow reports whether st is held and live by now: a lease with its own
// TTL by its expiry, one that lives by a session by that session's.
func (s *Store) liveNow(ctx context.Context, st leaseState, now time.Time) (leaseState, bool, error) {
	if !st.held {
		return st, false, nil
	}
	if st.lease.Session == "" {
		return st, st.live(now), nil
	}
	ss, err := s.readKey(ctx, sessionKey(st.lease.Session), st.lease.Thread)
	if err != nil {
		return st, false, err
	}
	st.lease.TTL, st.lease.Expires = ss.lease.TTL, ss.lease.Expires
	return st, ss.live(now), nil
}

// AcquireLease implements [events.Leaser]. The lease is free when its key
// has no value (never taken, released, or expired server-side) or its value
// has lapsed by this store's clock. It is taken by compare-and-set on the
// key's last revision, with a server-side TTL so a dead holder's lease goes
// away by itself.
func (s *Store) AcquireLease(ctx context.Context, thread, holder string, ttl time.Duration) (events.Lease, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return events.Lease{}, err
	}
	if err := checkLeaseArgs(holder, ttl); err != nil {
		return events.Lease{}, err
	}
	if err := s.checkOpen(); err != nil {
		return events.Lease{}, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	now := s.cfg.Now()
	rev, err := s.freeRevision(ctx, thread, now)
	if err != nil {
		return events.Lease{}, err
	}
	l, o := s.putLease(ctx, thread, holder, ttl, "", rev, now)
	if o.refused != nil {
		return events.Lease{}, fmt.Errorf("%w: lease of %s taken by another while acquiring it: %w", events.ErrThreadBusy, thread, o.refused)
	}
	return l, o.err
}

// freeRevision reads thread's lease and returns the revision a write taking
// it must expect, or an error wrapping [events.ErrThreadBusy] when it is
// live. A lease under session own (when set) is free to own's runner: it
// made it, and knows it holds no claim on it now.
func (s *Store) freeRevision(ctx context.Context, thread string, now time.Time, own ...string) (uint64, error) {
	st, err := s.readLease(ctx, thread)
	if err != nil {
		return 0, unavailable("read lease of "+thread, err)
	}
	if len(own) > 0 && st.held && st.lease.Session == own[0] {
		return st.rev, nil
	}
	st, live, err := s.liveNow(ctx, st, now)
	if err != nil {
		return 0, unavailable("read session of "+thread, err)
	}
	if live {
		return 0, fmt.Errorf("%w: lease of %s is held by %s until %s (%s from now by this store's clock)",
			events.ErrThreadBusy, thread, st.lease.Holder, st.lease.Expires.UTC().Format(time.RFC3339Nano), st.lease.Expires.Sub(now).Round(time.Millisecond))
	}
	return st.rev, nil
}

// RenewLease implements [events.Leaser]. It rewrites the value, and its
// server-side TTL, by compare-and-set on l.Revision. (kv.Update would drop
// the TTL, and the key would stop expiring: NATS-NOTES.)
func (s *Store) RenewLease(ctx context.Context, l events.Lease) (events.Lease, error) {
	if err := events.ValidateThreadID(l.Thread); err != nil {
		return events.Lease{}, err
	}
	if err := checkLeaseArgs(l.Holder, l.TTL); err != nil {
		return events.Lease{}, err
	}
	if err := s.checkOpen(); err != nil {
		return events.Lease{}, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	nl, o := s.putLease(ctx, l.Thread, l.Holder, l.TTL, l.Session, l.Revision, s.cfg.Now())
	if o.refused != nil {
		return events.Lease{}, fmt.Errorf("%w: lease of %s for %s moved past revision %d: %w", events.ErrLeaseLost, l.Thread, l.Holder, l.Revision, o.refused)
	}
	return nl, o.err
}

// putLease writes a lease value expecting rev as the key's last revision.
// A lease that lives by session has no TTL of its own: it is written without
// one, and lapses with its session. The lease is valid only when the outcome
// has neither refused nor err set.
func (s *Store) putLease(ctx context.Context, thread, holder string, ttl time.Duration, session string, rev uint64, now time.Time) (events.Lease, outcome) {
	return s.putKey(ctx, thread, thread, holder, ttl, session, rev, now)
}

// putKey writes a lease or session value under key expecting rev.
func (s *Store) putKey(ctx context.Context, key, thread, holder string, ttl time.Duration, session string, rev uint64, now time.Time) (events.Lease, outcome) {
	exp := now.Add(ttl)
	data, err := proto.Marshal(&eventspb.Lease{Holder: holder, ExpiresUnixNano: exp.UnixNano(), TtlMs: ttl.Milliseconds(), Session: session})
	if err != nil {
		return events.Lease{}, outcome{err: fmt.Errorf("natsstore: encode lease: %w", err)}
	}
	subject := s.kvPrefix + key
	jh := expectLast(rev)
	if session == "" {
		jh = append(jh, msgTTL(serverTTL(ttl))...)
	}
	o := s.publish(ctx, write{
		what:     fmt.Sprintf("write lease %s for %s expecting revision %d", subject, holder, rev),
		stream:   s.kvStream,
		subject:  subject,
		pub:      s.kvPut + key,
		data:     data,
		msgID:    key + ":" + nuid.Next(),
		after:    rev,
		jsHeader: jh,
	})
	if o.refused != nil || o.err != nil {
		return events.Lease{}, o
	}
	return events.Lease{Thread: thread, Holder: holder, Revision: o.ack.Seq, TTL: ttl, Expires: exp, Session: session}, o
}

// ReleaseLease implements [events.Leaser]: a KV delete by compare-and-set on
// l.Revision. The delete marker itself expires after a while, so released
// keys do not pile up.
func (s *Store) ReleaseLease(ctx context.Context, l events.Lease) error {
	if err := events.ValidateThreadID(l.Thread); err != nil {
		return err
	}
	return s.deleteKey(ctx, l.Thread, l.Holder, l.Revision)
}

// deleteKey deletes a lease or session key by compare-and-set on rev.
func (s *Store) deleteKey(ctx context.Context, name, holder string, rev uint64) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	l := events.Lease{Thread: name, Holder: holder, Revision: rev}
	key := s.kvPrefix + name
	o := s.publish(ctx, write{
		what:     fmt.Sprintf("delete lease %s of %s expecting revision %d", key, l.Holder, l.Revision),
		stream:   s.kvStream,
		subject:  key,
		pub:      s.kvPut + name,
		header:   nats.Header{headerKVOperation: {"DEL"}},
		msgID:    name + ":" + nuid.Next(),
		after:    l.Revision,
		jsHeader: append(expectLast(l.Revision), msgTTL(markerTTL)...),
	})
	if o.refused != nil {
		return fmt.Errorf("%w: lease of %s for %s moved past revision %d: %w", events.ErrLeaseLost, l.Thread, l.Holder, l.Revision, o.refused)
	}
	return o.err
}

// GetLease implements [events.Leaser]. A lease that lapsed by this store's
// clock is returned with live false; a free key returns the zero Lease.
func (s *Store) GetLease(ctx context.Context, thread string) (events.Lease, bool, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return events.Lease{}, false, err
	}
	if err := s.checkOpen(); err != nil {
		return events.Lease{}, false, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	st, err := s.readLease(ctx, thread)
	if err != nil {
		return events.Lease{}, false, unavailable("read lease of "+thread, err)
	}
	st, live, err := s.liveNow(ctx, st, s.cfg.Now())
	if err != nil {
		return events.Lease{}, false, unavailable("read session of "+thread, err)
	}
	return st.lease, live, nil
}

func checkLeaseArgs(holder string, ttl time.Duration) error {
	if holder == "" {
		return fmt.Errorf("%w: lease without a holder", events.ErrInvalidEvent)
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: lease TTL %s is not positive", events.ErrInvalidEvent, ttl)
	}
	return nil
}

// serverTTL is the TTL the server enforces: ttl rounded up to whole seconds,
// at least 1s, the server's granularity. Rounding up keeps the server from
// removing a lease its holder still counts as live.
func serverTTL(ttl time.Duration) time.Duration {
	secs := (ttl + time.Second - 1) / time.Second
	return max(secs, 1) * time.Second
}
