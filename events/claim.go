package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/artifactr/artifactr/events/eventspb"
)

// maxClaimAttempts bounds the compare-and-set loop of AcquireClaim. Each
// conflict means the claim subject moved while we held the lease (a stale
// claimant's marker or a release landing); more than a few in a row means
// another live writer, and the thread is busy.
const maxClaimAttempts = 8

// AcquireClaim claims thread for holder under a lease with its own TTL
// ([Leaser]), following DESIGN §3:
//
//  1. acquire the lease (create, or take over a lapsed or released one);
//  2. read the last claim sequence c0;
//  3. append thread_claimed expecting c0, retrying from 2 on a conflict
//     while the lease is still ours;
//  4. load the thread's events, which include every consuming write that
//     landed before the marker.
//
// It returns the claim and the thread's events up to at least its marker. A
// thread held by another returns an error wrapping [ErrThreadBusy].
//
// Runners claim under a session instead ([AcquireSessionClaim]); see
// [Leaser] for who uses this one, and why.
func AcquireClaim(ctx context.Context, s ClaimStore, thread, holder string, ttl time.Duration, now time.Time) (Claim, []Envelope, error) {
	if err := ValidateThreadID(thread); err != nil {
		return Claim{}, nil, err
	}
	lease, err := s.AcquireLease(ctx, thread, holder, ttl)
	if err != nil {
		return Claim{}, nil, err
	}
	c, err := appendMarker(ctx, s, lease, now)
	if err != nil {
		return Claim{}, nil, err
	}
	envs, err := s.Load(ctx, thread, 1)
	if err != nil {
		return c, nil, fmt.Errorf("events: load %s after claim: %w", thread, err)
	}
	return c, envs, nil
}

// ClaimStore is what [AcquireClaim] needs of a store: leases, the claim
// marker's compare-and-set append, and the reads around it.
type ClaimStore interface {
	Appender
	Loader
	LastSeqReader
	Leaser
}

// SessionClaimStore is what [AcquireSessionClaim] needs of a store: the
// reads and append of a [ClaimStore], and leases that live by a runner
// session. It needs no [Leaser]: a session claim never takes a lease with
// its own TTL.
type SessionClaimStore interface {
	Appender
	Loader
	LastSeqReader
	LeaseKeeper
	SessionLeaser
}

// AcquireSessionClaim claims thread for holder under the runner session
// sess, with the steps of [AcquireClaim], but it loads only the events with
// sequence >= from: a caller that holds the thread's fold up to from-1 (a
// snapshot) need not replay the rest. from 0 or 1 loads everything. The
// events returned reach the claim's marker; a store that is a
// [BoundedLoader] returns them up to the marker exactly, and the caller
// follows the log for the rest.
func AcquireSessionClaim(ctx context.Context, s SessionClaimStore, sess Session, thread, holder string, from uint64, now time.Time) (Claim, []Envelope, error) {
	c, err := AcquireSessionMarker(ctx, s, sess, thread, holder, now)
	if err != nil {
		return Claim{}, nil, err
	}
	envs, err := LoadClaimed(ctx, s, c, from)
	if err != nil {
		return c, nil, err
	}
	return c, envs, nil
}

// AcquireSessionMarker is the first part of [AcquireSessionClaim]: the
// lease and the marker, without the load. A caller that starts from a
// snapshot only when the thread had a claim before (Claim.Prev) loads with
// [LoadClaimed].
func AcquireSessionMarker(ctx context.Context, s SessionClaimStore, sess Session, thread, holder string, now time.Time) (Claim, error) {
	if err := ValidateThreadID(thread); err != nil {
		return Claim{}, err
	}
	lease, err := s.AcquireSessionLease(ctx, thread, holder, sess)
	if err != nil {
		return Claim{}, err
	}
	c, err := appendMarker(ctx, s, lease, now)
	if err != nil {
		// Keep the lease: it lives by the session, the caller's runner may
		// take it again at once (a lease under its own session is free to
		// it), and should that runner die first, the session's lapse shows
		// the thread to the others. Given back, it would leave a thread
		// with a run to abandon and no post that nobody would look at.
		// Not ErrThreadBusy even when the marker lost its races: the lease
		// is this holder's, so others that found the thread busy gave it
		// up meanwhile, and the caller must try again.
		return Claim{}, fmt.Errorf("events: claim of %s not completed (its lease kept for a retry): %v", thread, err)
	}
	return c, nil
}

// LoadClaimed loads c's thread from sequence from (0 or 1 for all) up to
// c's marker, or to the log's end when the store is no [BoundedLoader].
func LoadClaimed(ctx context.Context, s Loader, c Claim, from uint64) ([]Envelope, error) {
	var envs []Envelope
	var err error
	if bl, ok := s.(BoundedLoader); ok {
		envs, err = bl.LoadUpTo(ctx, c.Thread, max(from, 1), c.Seq)
	} else {
		envs, err = s.Load(ctx, c.Thread, max(from, 1))
	}
	if err != nil {
		return nil, fmt.Errorf("events: load %s after claim: %w", c.Thread, err)
	}
	return envs, nil
}

// claimer is what appendMarker needs of a store.
type claimer interface {
	Appender
	LastSeqReader
	LeaseKeeper
}

// appendMarker is steps 2 and 3 of a claim: append thread_claimed by
// compare-and-set on the claim subject, retrying while the lease is ours.
// Under the RUNFENCE layout ([Subjects.RunFence]) the marker goes on the
// run subject, so c0 is the run subject's last sequence: the claim then
// refuses to land past a holder write it has not seen, and moves the run
// subject, so every older holder's next write is refused.
func appendMarker(ctx context.Context, s claimer, lease Lease, now time.Time) (Claim, error) {
	thread, holder := lease.Thread, lease.Holder
	on := markerKind(s)
	// Expect an empty subject first: a thread's first claim then costs
	// no read, and a wrong guess is only a conflict that reads c0.
	c0, known := uint64(0), false
	for attempt := 0; ; attempt++ {
		if known {
			var err error
			if c0, err = s.LastSeq(ctx, thread, on); err != nil {
				return Claim{}, err
			}
		}
		ev := &eventspb.Event{
			Thread: thread,
			Time:   timestamppb.New(now),
			Holder: holder,
			Body: &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{
				Holder:        holder,
				LeaseRevision: lease.Revision,
				LeaseTtlMs:    lease.TTL.Milliseconds(),
			}},
		}
		ack, err := s.Append(ctx, ev, ExpectLast(c0))
		if err == nil {
			return Claim{Thread: thread, Holder: holder, Seq: ack.Seq, Lease: lease, Prev: c0}, nil
		}
		if !errors.Is(err, ErrConflict) {
			return Claim{}, err
		}
		if !known {
			known = true
			continue // the guess was wrong; read c0 and try again
		}
		if attempt+1 >= maxClaimAttempts {
			return Claim{}, fmt.Errorf("%w: %s subject of %s keeps moving", ErrThreadBusy, on, thread)
		}
		// Retry only while the lease is still ours.
		if lease, err = s.RenewLease(ctx, lease); err != nil {
			if errors.Is(err, ErrLeaseLost) {
				return Claim{}, fmt.Errorf("%w: lease of %s lost while claiming", ErrThreadBusy, thread)
			}
			return Claim{}, err
		}
	}
}

// markerKind is the subject kind s stores claim markers and releases on:
// the run subject under RunFence, else the claim subject.
func markerKind(s any) Kind {
	if n, ok := s.(SubjectNamer); ok {
		return n.Subjects().KindOf(TypeThreadClaimed)
	}
	return KindClaim
}

// ReleaseStore is what [ReleaseClaim] needs of a store: it releases
// leases of either kind.
type ReleaseStore interface {
	Appender
	LeaseKeeper
}

// ReleaseClaim gives c up: it appends thread_released expecting c's marker to
// be the newest, then deletes the lease so the thread can be claimed at once.
// A release that finds a newer claim has nothing to give up and returns nil.
// It is [ReleaseClaimAt] with runSeq c.Seq.
func ReleaseClaim(ctx context.Context, s ReleaseStore, c Claim, reason string, now time.Time) error {
	return ReleaseClaimAt(ctx, s, c, c.Seq, reason, now)
}

// ReleaseClaimAt is [ReleaseClaim] for a holder that wrote since its claim:
// under the RUNFENCE layout ([Subjects.RunFence]) the release is a
// compare-and-set on the run subject expecting runSeq, the run subject's
// last sequence as the holder knows it (its K); otherwise runSeq is
// unused and the release expects c's marker on the claim subject. The lease
// is deleted whether the release landed or not.
func ReleaseClaimAt(ctx context.Context, s ReleaseStore, c Claim, runSeq uint64, reason string, now time.Time) error {
	if err := ReleaseMarkerAt(ctx, s, c, runSeq, reason, now); err != nil {
		return err
	}
	if lerr := s.ReleaseLease(ctx, c.Lease); lerr != nil && !errors.Is(lerr, ErrLeaseLost) {
		return lerr
	}
	return nil
}

// ReleaseMarker appends thread_released expecting c's marker to be the
// newest, and leaves the lease as it is: a runner that closes its session
// next hands the thread to whoever takes that session's leases. A release
// that finds a newer claim has nothing to give up and returns nil. It is
// [ReleaseMarkerAt] with runSeq c.Seq.
func ReleaseMarker(ctx context.Context, s Appender, c Claim, reason string, now time.Time) error {
	return ReleaseMarkerAt(ctx, s, c, c.Seq, reason, now)
}

// ReleaseMarkerAt is [ReleaseMarker] for a holder that wrote since its
// claim: under the RUNFENCE layout (s is a [SubjectNamer] whose subjects
// say RunFence) the release lands on the run subject expecting runSeq, the
// run subject's last sequence as the holder knows it; otherwise it expects
// c.Seq on the claim subject and runSeq is unused. A refused release
// returns nil: a newer claim, or under RUNFENCE a write the holder has not
// seen, leaves it nothing it may give up (releases are for liveness only).
func ReleaseMarkerAt(ctx context.Context, s Appender, c Claim, runSeq uint64, reason string, now time.Time) error {
	ev := &eventspb.Event{
		Thread:   c.Thread,
		Time:     timestamppb.New(now),
		ClaimSeq: c.Seq,
		Holder:   c.Holder,
		Body: &eventspb.Event_ThreadReleased{ThreadReleased: &eventspb.ThreadReleased{
			Holder: c.Holder,
			Reason: reason,
		}},
	}
	expect := c.Seq
	if markerKind(s) == KindRun {
		expect = runSeq
	}
	_, err := s.Append(ctx, ev, ExpectLast(expect))
	if err != nil && !errors.Is(err, ErrConflict) {
		return err
	}
	return nil
}
