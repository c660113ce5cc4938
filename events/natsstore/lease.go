package natsstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
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
	// stored is when the server stored the value; unexplained, when set,
	// is why the lease protocol cannot have written it (see
	// Config.UnexplainedLeaseTTL).
	stored      time.Time
	unexplained string
}

// Bounds of what the lease protocol writes: a lease or session with its
// own TTL carries a server-side TTL, a TTL of at most maxLeaseTTL, and an
// expiry at most its TTL after it was stored, give or take leaseSkew of
// the writer's clock against the server's.
const (
	maxLeaseTTL = time.Hour
	leaseSkew   = time.Minute
)

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
	st := leaseState{rev: m.Sequence, stored: m.Time}
	if m.Header.Get(headerKVOperation) != "" || m.Header.Get(headerMarkerReason) != "" {
		return st, nil // deleted, purged or expired
	}
	st.held = true
	st.lease = events.Lease{Thread: thread, Revision: m.Sequence}
	var v eventspb.Lease
	if err := proto.Unmarshal(m.Data, &v); err != nil {
		st.unexplained = fmt.Sprintf("its value does not decode (%v)", err)
		return st, nil
	}
	st.lease.Holder = v.GetHolder()
	st.lease.TTL = time.Duration(v.GetTtlMs()) * time.Millisecond
	st.lease.Expires = time.Unix(0, v.GetExpiresUnixNano())
	st.lease.Session = v.GetSession()
	if st.lease.Session == "" {
		st.unexplained = unexplainedExpiry(st.lease, m.Time, m.Header.Get(jetstream.MsgTTLHeader))
	}
	return st, nil
}

// unexplainedExpiry returns why l, a lease or session with its own TTL
// stored at stored with the server-side TTL header ttl, is not one the
// lease protocol writes, or "". The server removes the key at that TTL, so
// it bounds the expiry too.
func unexplainedExpiry(l events.Lease, stored time.Time, ttl string) string {
	if ttl == "" {
		return "it has no session and no server-side TTL"
	}
	d, err := time.ParseDuration(ttl)
	if err != nil {
		if secs, serr := strconv.ParseUint(ttl, 10, 32); serr == nil {
			d, err = time.Duration(secs)*time.Second, nil
		}
	}
	switch {
	case err != nil || d <= 0 || d > maxLeaseTTL:
		return fmt.Sprintf("its server-side TTL %q is not within (0, %s]", ttl, maxLeaseTTL)
	case l.Expires.After(stored.Add(d + leaseSkew)):
		return fmt.Sprintf("it expires at %s, beyond its server-side TTL %s after it was stored at %s",
			l.Expires.UTC().Format(time.RFC3339), d, stored.UTC().Format(time.RFC3339))
	}
	return ""
}

// unexplainedLive reports whether an unexplained lease, or one under an
// unexplained session, still holds its thread by now.
func (s *Store) unexplainedLive(st leaseState, now time.Time) bool {
	return now.Before(st.stored.Add(s.cfg.UnexplainedLeaseTTL))
}

// liveNow reports whether st is held and live by now: a lease with its own
// TTL by its expiry, one that lives by a session by that session's.
func (s *Store) liveNow(ctx context.Context, st leaseState, now time.Time) (leaseState, bool, error) {
	switch {
	case !st.held:
		return st, false, nil
	case st.unexplained != "":
		return st, s.unexplainedLive(st, now), nil
	case st.lease.Session == "":
		return st, st.live(now), nil
	}
	ss, err := s.readKey(ctx, sessionKey(st.lease.Session), st.lease.Thread)
	if err != nil {
		return st, false, err
	}
	switch {
	case ss.rev == 0:
		// No session key was ever written, or so long ago that even its
		// expiry marker is gone: then the lease is old too.
		st.unexplained = fmt.Sprintf("it names session %s, which does not exist", st.lease.Session)
		return st, s.unexplainedLive(st, now), nil
	case ss.unexplained != "":
		st.unexplained = fmt.Sprintf("its session %s is not one the protocol writes: %s", st.lease.Session, ss.unexplained)
		st.stored = ss.stored
		return st, s.unexplainedLive(st, now), nil
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
	rev, reclaimed, err := s.freeRevision(ctx, thread, now)
	if err != nil {
		return events.Lease{}, err
	}
	l, o := s.putLease(ctx, thread, holder, ttl, "", rev, now)
	if o.refused != nil {
		return events.Lease{}, fmt.Errorf("%w: lease of %s taken by another while acquiring it: %w", events.ErrThreadBusy, thread, o.refused)
	}
	l.Reclaimed = s.reclaimed(l, o.err, reclaimed)
	return l, o.err
}

// reclaimed logs and counts the taking of an unexplained lease by l, and
// returns why it was unexplained, or "" when it was not or l was not taken.
func (s *Store) reclaimed(l events.Lease, err error, why string) string {
	if why == "" || err != nil {
		return ""
	}
	s.leasesReclaimed.Add(1)
	s.cfg.Logger.Warn("natsstore: reclaimed a lease that no live session explains",
		"thread", l.Thread, "holder", l.Holder, "revision", l.Revision, "reason", why)
	return why
}

// LeasesReclaimed returns how many unexplained leases this store took
// (see Config.UnexplainedLeaseTTL).
func (s *Store) LeasesReclaimed() int64 { return s.leasesReclaimed.Load() }

// freeRevision reads thread's lease and returns the revision a write taking
// it must expect, or an error wrapping [events.ErrThreadBusy] when it is
// live. A lease under session own (when set) is free to own's runner: it
// made it, and knows it holds no claim on it now. reclaimed is why the
// lease is unexplained, when it is one taken after its
// Config.UnexplainedLeaseTTL.
func (s *Store) freeRevision(ctx context.Context, thread string, now time.Time, own ...string) (rev uint64, reclaimed string, err error) {
	st, err := s.readLease(ctx, thread)
	if err != nil {
		return 0, "", unavailable("read lease of "+thread, err)
	}
	if len(own) > 0 && st.held && st.unexplained == "" && st.lease.Session == own[0] {
		return st.rev, "", nil
	}
	st, live, err := s.liveNow(ctx, st, now)
	if err != nil {
		return 0, "", unavailable("read session of "+thread, err)
	}
	switch {
	case live && st.unexplained != "":
		return 0, "", fmt.Errorf("%w: lease of %s (holder %q, revision %d) is explained by no live session: %s; it is taken at %s",
			events.ErrThreadBusy, thread, st.lease.Holder, st.rev, st.unexplained, st.stored.Add(s.cfg.UnexplainedLeaseTTL).UTC().Format(time.RFC3339))
	case live:
		return 0, "", fmt.Errorf("%w: lease of %s is held by %s until %s (%s from now by this store's clock)",
			events.ErrThreadBusy, thread, st.lease.Holder, st.lease.Expires.UTC().Format(time.RFC3339Nano), st.lease.Expires.Sub(now).Round(time.Millisecond))
	}
	return st.rev, st.unexplained, nil
}

// UnexplainedLease is a lease that no live session explains (see
// Config.UnexplainedLeaseTTL), as [Store.UnexplainedLeases] lists it.
type UnexplainedLease struct {
	Thread   string    `json:"thread"`
	Holder   string    `json:"holder"`
	Session  string    `json:"session,omitempty"`
	Revision uint64    `json:"revision"`
	Stored   time.Time `json:"stored"`
	Reason   string    `json:"reason"`
	// TakenAt is when runners may take the thread: Stored plus the
	// store's UnexplainedLeaseTTL (in the past once it may).
	TakenAt time.Time `json:"taken_at"`
}

// UnexplainedLeases lists the thread leases in the bucket that no live
// session explains, in key order. It only reads.
func (s *Store) UnexplainedLeases(ctx context.Context) ([]UnexplainedLease, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	kv, err := s.js.KeyValue(ctx, s.cfg.Bucket)
	if err != nil {
		return nil, unavailable("open lease bucket "+s.cfg.Bucket, err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, unavailable("list leases", err)
	}
	var names []string
	for k := range keys.Keys() {
		if events.ValidateThreadID(k) == nil {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var out []UnexplainedLease
	now := s.cfg.Now()
	for _, th := range names {
		st, err := s.readLease(ctx, th)
		if err != nil {
			return nil, unavailable("read lease of "+th, err)
		}
		if st, _, err = s.liveNow(ctx, st, now); err != nil {
			return nil, unavailable("read session of "+th, err)
		}
		if st.unexplained == "" {
			continue
		}
		out = append(out, UnexplainedLease{Thread: th, Holder: st.lease.Holder, Session: st.lease.Session, Revision: st.rev,
			Stored: st.stored, Reason: st.unexplained, TakenAt: st.stored.Add(s.cfg.UnexplainedLeaseTTL)})
	}
	return out, nil
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
