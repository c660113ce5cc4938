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

	"artifactr/events"
	"artifactr/events/eventspb"
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
	m, err := s.getMsg(ctx, s.kvStream, msgGetRequest{LastFor: s.kvPrefix + thread})
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
			"thread", thread, "revision", m.Sequence, "error", err)
		return st, nil
	}
	st.held = true
	st.lease = events.Lease{
		Thread:   thread,
		Holder:   v.GetHolder(),
		Revision: m.Sequence,
		TTL:      time.Duration(v.GetTtlMs()) * time.Millisecond,
		Expires:  time.Unix(0, v.GetExpiresUnixNano()),
	}
	return st, nil
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
	st, err := s.readLease(ctx, thread)
	if err != nil {
		return events.Lease{}, unavailable("read lease of "+thread, err)
	}
	now := s.cfg.Now()
	if st.live(now) {
		return events.Lease{}, fmt.Errorf("%w: lease of %s is held by %s until %s (%s from now by this store's clock)",
			events.ErrThreadBusy, thread, st.lease.Holder, st.lease.Expires.UTC().Format(time.RFC3339Nano), st.lease.Expires.Sub(now).Round(time.Millisecond))
	}
	l, o := s.putLease(ctx, thread, holder, ttl, st.rev, now)
	if o.refused != nil {
		return events.Lease{}, fmt.Errorf("%w: lease of %s taken by another while acquiring it: %w", events.ErrThreadBusy, thread, o.refused)
	}
	return l, o.err
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
	nl, o := s.putLease(ctx, l.Thread, l.Holder, l.TTL, l.Revision, s.cfg.Now())
	if o.refused != nil {
		return events.Lease{}, fmt.Errorf("%w: lease of %s for %s moved past revision %d: %w", events.ErrLeaseLost, l.Thread, l.Holder, l.Revision, o.refused)
	}
	return nl, o.err
}

// putLease writes a lease value expecting rev as the key's last revision.
// The lease is valid only when the outcome has neither refused nor err set.
func (s *Store) putLease(ctx context.Context, thread, holder string, ttl time.Duration, rev uint64, now time.Time) (events.Lease, outcome) {
	exp := now.Add(ttl)
	data, err := proto.Marshal(&eventspb.Lease{Holder: holder, ExpiresUnixNano: exp.UnixNano(), TtlMs: ttl.Milliseconds()})
	if err != nil {
		return events.Lease{}, outcome{err: fmt.Errorf("natsstore: encode lease: %w", err)}
	}
	key := s.kvPrefix + thread
	o := s.publish(ctx, write{
		what:    fmt.Sprintf("write lease %s for %s expecting revision %d", key, holder, rev),
		stream:  s.kvStream,
		subject: key,
		data:    data,
		msgID:   thread + ":" + nuid.Next(),
		after:   rev,
		opts: []jetstream.PublishOpt{
			jetstream.WithExpectLastSequencePerSubject(rev),
			jetstream.WithMsgTTL(serverTTL(ttl)),
		},
	})
	if o.refused != nil || o.err != nil {
		return events.Lease{}, o
	}
	return events.Lease{Thread: thread, Holder: holder, Revision: o.ack.Seq, TTL: ttl, Expires: exp}, o
}

// ReleaseLease implements [events.Leaser]: a KV delete by compare-and-set on
// l.Revision. The delete marker itself expires after a while, so released
// keys do not pile up.
func (s *Store) ReleaseLease(ctx context.Context, l events.Lease) error {
	if err := events.ValidateThreadID(l.Thread); err != nil {
		return err
	}
	if err := s.checkOpen(); err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	key := s.kvPrefix + l.Thread
	o := s.publish(ctx, write{
		what:    fmt.Sprintf("delete lease %s of %s expecting revision %d", key, l.Holder, l.Revision),
		stream:  s.kvStream,
		subject: key,
		header:  nats.Header{headerKVOperation: {"DEL"}},
		msgID:   l.Thread + ":" + nuid.Next(),
		after:   l.Revision,
		opts: []jetstream.PublishOpt{
			jetstream.WithExpectLastSequencePerSubject(l.Revision),
			jetstream.WithMsgTTL(markerTTL),
		},
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
	return st.lease, st.live(s.cfg.Now()), nil
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
