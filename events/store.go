package events

import (
	"context"
	"fmt"
	"time"

	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/internal/unfence"
)

// DefaultMaxEventBytes is the default limit on an encoded event's size.
const DefaultMaxEventBytes = 1 << 20

// Store is a thread event log with leases. The JetStream store (natsstore)
// and the in-memory store (memstore) implement it with the same semantics,
// checked by the contract suite in eventstest.
//
// Every method validates its thread id first and returns an error wrapping
// [ErrInvalidThreadID] without writing anything when it is bad.
//
// Store is made of small role interfaces; a function takes only the roles it
// uses, as [AcquireClaim] takes a [ClaimStore].
type Store interface {
	Poster
	Appender
	Reader
	Leaser
	SessionLeaser
	SubjectNamer
	// Close releases the store's resources. It does not release leases.
	Close() error
}

// SubjectNamer names the subjects of a store's stream. A component that
// works on a store's subjects takes them from here, so it cannot be
// configured to contradict the store.
type SubjectNamer interface {
	// Subjects returns the subjects of the store's stream.
	Subjects() Subjects
}

// Poster posts messages.
type Poster interface {
	// Post appends message_posted to threads.T.posted. It is idempotent by
	// MessageId within the deduplication window: a repeat returns the
	// original sequence with Duplicate set. An empty MessageId is filled in.
	// Options add headers, such as [WithTraceContext].
	Post(ctx context.Context, thread string, m *eventspb.MessagePosted, opts ...PostOption) (Ack, error)
}

// Appender appends claim and run events.
type Appender interface {
	// Append appends ev to the subject of its type, carrying chk. A refused
	// check writes nothing: it returns [ErrThreadBusy] for [Fenced] and
	// [ErrConflict] for [ExpectLast]. An error that wraps neither, nor
	// [ErrInvalidEvent], [ErrTooLarge] or [ErrInvalidThreadID], means the
	// outcome is unknown; Append has already retried with the same message id
	// and read the subject back where it could.
	Append(ctx context.Context, ev *eventspb.Event, chk Check, opts ...AppendOption) (Ack, error)
}

// Reader reads the log: every read role.
type Reader interface {
	Loader
	LastSeqReader
	Tailer
	ThreadLister
}

// Loader loads a thread's events.
type Loader interface {
	// Load returns every event of thread with sequence >= from, at least up
	// to the stream's last sequence when Load was called, in order.
	// Malformed events are returned with Envelope.Err set.
	Load(ctx context.Context, thread string, from uint64) ([]Envelope, error)
}

// LastSeqReader reads the last sequence of a thread's subject.
type LastSeqReader interface {
	// LastSeq returns the sequence of the last event on thread's subject of
	// kind k, or 0 when there is none.
	LastSeq(ctx context.Context, thread string, k Kind) (uint64, error)
}

// ThreadLastSeq returns the sequence of thread's newest event: the largest
// last sequence of its three subjects, or 0 when it has none.
func ThreadLastSeq(ctx context.Context, s LastSeqReader, thread string) (uint64, error) {
	var last uint64
	for _, k := range Kinds() {
		n, err := s.LastSeq(ctx, thread, k)
		if err != nil {
			return 0, err
		}
		last = max(last, n)
	}
	return last, nil
}

// Tailer follows the log.
type Tailer interface {
	// Tail follows events on a subject filter, such as threads.T.> or
	// threads.*.posted, from sequence from (0 means only new events).
	Tail(ctx context.Context, filter string, from uint64) (Tail, error)
}

// ThreadLister lists threads.
type ThreadLister interface {
	// Threads lists the threads that have a posted message, in no set order.
	Threads(ctx context.Context) ([]string, error)
}

// PartitionReader reads one partition's stream, for a runner that follows
// it: the cost of each call grows with that partition alone, and a call
// fails only when that partition's stream cannot be read.
type PartitionReader interface {
	// LastPartitionSeq returns the sequence of the last message stored in
	// partition p's stream, or 0 when there is none.
	LastPartitionSeq(ctx context.Context, p int) (uint64, error)
	// PartitionThreads lists the threads of partition p that have a posted
	// message, in no set order.
	PartitionThreads(ctx context.Context, p int) ([]string, error)
}

// BoundedLoader is a [Reader] that can load a thread's events up to a
// sequence the caller knows is stored, which a store may do more cheaply
// than [Reader.Load].
type BoundedLoader interface {
	// LoadUpTo returns every event of thread with from <= sequence <=
	// upTo, in order. upTo must be stored already; 0 means Load.
	LoadUpTo(ctx context.Context, thread string, from, upTo uint64) ([]Envelope, error)
}

// SnapshotStore keeps one snapshot per thread: the thread's fold at a
// sequence, so a claim need not replay the whole log. A snapshot is a cache:
// a missing one costs only more replay, and the reader verifies and ignores
// a bad one.
//
// Both methods return an error wrapping [ErrInvalidThreadID] for a bad
// thread id. The contract suite is eventstest.RunSnapshot.
type SnapshotStore interface {
	// SaveSnapshot replaces thread's snapshot. It may keep one larger than
	// an event in pieces, and refuses one over the store's bound (256
	// events' worth in natsstore and memstore) with an error wrapping
	// [ErrTooLarge], keeping the one before.
	SaveSnapshot(ctx context.Context, thread string, data []byte) error
	// LoadSnapshot returns thread's snapshot, or nil when it has none.
	LoadSnapshot(ctx context.Context, thread string) ([]byte, error)
}

// LeaseKeeper renews, releases and reads the leases in the claims bucket,
// of either kind: one that lives by a runner session ([SessionLeaser]) or
// one with its own TTL ([Leaser]). A lease decides liveness only: who
// should work on a thread, and when a dead holder's thread may be taken.
// Safety rests on the claim marker and [Fenced].
//
// Production uses it with sessions: a claim renews its lease before it
// retries its marker (proving the lease is still its own), [ReleaseClaim]
// deletes it, and `artifactr threads` reads it.
type LeaseKeeper interface {
	// RenewLease extends l by its TTL by compare-and-set on its revision; a
	// lease that lives by a session is rewritten as it is, which proves it
	// is still the caller's. It returns [ErrLeaseLost] when the lease moved
	// on.
	RenewLease(ctx context.Context, l Lease) (Lease, error)
	// ReleaseLease deletes l by compare-and-set on its revision, so the
	// thread can be claimed at once. It returns [ErrLeaseLost] when the lease
	// moved on.
	ReleaseLease(ctx context.Context, l Lease) error
	// GetLease returns thread's current lease and whether one is held and not
	// lapsed by this store's clock (or its session's).
	GetLease(ctx context.Context, thread string) (Lease, bool, error)
}

// Leaser adds leases with their own TTL to [LeaseKeeper]: one key per
// thread, renewed one by one by its holder, the claim protocol's first
// lease. Production never takes one: runners claim under sessions
// ([SessionLeaser], [AcquireSessionClaim]), which cost one renewal per
// runner rather than per thread.
//
// It stays on [Store] for the code that drives the claim protocol one
// thread at a time, through [AcquireClaim]:
//   - test/sim, the thread-level simulation: each process holds a [Store],
//     claims with AcquireClaim and renews its one lease itself, with faults
//     drawn around AcquireLease and RenewLease. Its model is a lease per
//     thread on each process's clock; a session would add a second key and
//     a renewal loop that it does not model (test/sim/runners simulates
//     runners, sessions and all);
//   - the contract suite (eventstest.RunStore's lease tests, the race
//     harness's stealClaim) and spec/rapid_test.go, which check the
//     compare-and-set lease semantics that session leases share;
//   - tests that write a thread's log by hand (client, cmd, actors/thread,
//     internal/doubletext).
//
// The session path needs only [LeaseKeeper] ([SessionClaimStore],
// [ReleaseStore]), so once test/sim claims through a narrower interface
// than Store, Leaser can leave Store for [ClaimStore] alone.
type Leaser interface {
	LeaseKeeper
	// AcquireLease takes thread's lease for holder, if it is free, released
	// or lapsed by this store's clock. Otherwise it returns an error wrapping
	// [ErrThreadBusy] that names the current holder.
	AcquireLease(ctx context.Context, thread, holder string, ttl time.Duration) (Lease, error)
}

// SessionLeaser manages runner sessions: one key with a TTL per runner,
// renewed by its owner, that any number of thread leases live by, as etcd
// attaches many keys to one lease. A runner's renewals then cost one write
// per TTL/3 whatever the number of threads it holds, and a runner that dies
// or stalls past its TTL lapses all its leases at once. Like every lease, a
// session decides liveness only.
type SessionLeaser interface {
	// OpenSession creates a fresh session for owner with the given TTL.
	OpenSession(ctx context.Context, owner string, ttl time.Duration) (Session, error)
	// RenewSession extends s by its TTL by compare-and-set on its revision.
	// It returns [ErrLeaseLost] when the session lapsed or was closed: every
	// lease acquired under it is then free for others.
	RenewSession(ctx context.Context, s Session) (Session, error)
	// CloseSession deletes s, lapsing every lease that lives by it at once.
	// It returns [ErrLeaseLost] when s had already moved on.
	CloseSession(ctx context.Context, s Session) error
	// AcquireSessionLease takes thread's lease for holder under s, if it is
	// free, released, held under a session that lapsed by this store's
	// clock, or held under s itself (its runner holds no claim on it: one
	// that failed half way left the lease). Otherwise it returns an error
	// wrapping [ErrThreadBusy].
	AcquireSessionLease(ctx context.Context, thread, holder string, s Session) (Lease, error)
	// WatchLeases follows every change to thread leases and sessions: first
	// the current state of every key, then a [LeaseUpdate] with CaughtUp
	// set, then changes as they happen.
	WatchLeases(ctx context.Context) (LeaseWatch, error)
}

// Session is a runner's liveness lease. See [SessionLeaser].
type Session struct {
	ID       string        // unique per session; never reused
	Owner    string        // the runner that opened it
	Revision uint64        // compare-and-set token of its key
	TTL      time.Duration // how long it lives without renewal
	Expires  time.Time     // by the owner's clock; liveness only
}

// LeaseUpdate is one change seen by a [LeaseWatch]: a thread lease written
// or removed, or a session renewed, closed or expired.
type LeaseUpdate struct {
	// Thread is the leased thread; empty for a session's own key.
	Thread string
	// Session is the session a thread lease lives by, or the session whose
	// key changed. Empty for a thread lease with its own TTL.
	Session string
	// Holder is the lease's holder, or the session's owner.
	Holder string
	// Present is false when the key was deleted, purged or expired.
	Present bool
	// Revision is the key's revision after the change.
	Revision uint64
	// CaughtUp marks the end of the initial state; no other field is set.
	CaughtUp bool
}

// LeaseWatch is a live follow of the lease bucket.
type LeaseWatch interface {
	// Next blocks until the next update, ctx is done, or the watch stops.
	Next(ctx context.Context) (LeaseUpdate, error)
	// Stop ends the watch. It is safe to call more than once.
	Stop()
}

// Tail is a live follow of the log.
type Tail interface {
	// Next blocks until the next event, ctx is done, or the tail is stopped.
	// A Next that returns because ctx is done leaves the tail as it was:
	// the next call returns the event this one would have.
	Next(ctx context.Context) (Envelope, error)
	// Stop ends the tail. It is safe to call more than once.
	Stop()
}

// Ack is a successful append.
type Ack struct {
	Seq       uint64 // the event's stream sequence
	Duplicate bool   // the append had landed before; Seq is the original
}

// Lease is a held lease on a thread.
type Lease struct {
	Thread   string
	Holder   string
	Revision uint64        // the KV revision; compare-and-set token
	TTL      time.Duration // how long the lease lives without renewal
	Expires  time.Time     // by the writer's clock; liveness only
	// Session is the session the lease lives by, if any; TTL and Expires
	// are then the session's as last read.
	Session string
	// Reclaimed, set on a lease just acquired, says why the lease it
	// replaced was taken although it had not lapsed the usual way: no live
	// session explained it (a store's rule; natsstore's is
	// Config.UnexplainedLeaseTTL). "" for an ordinary acquisition.
	Reclaimed string
}

// Claim is a held claim: a lease plus the claim marker whose sequence is the
// fencing token.
type Claim struct {
	Thread string
	Holder string
	Seq    uint64 // claim_seq: the stream sequence of the thread_claimed marker
	Lease  Lease
	// Prev is the claim subject's last sequence before the marker, as its
	// compare-and-set expected it: 0 for the thread's first claim. Under
	// the RUNFENCE layout ([Subjects.RunFence]) it is the run subject's
	// last sequence before the marker.
	Prev uint64
}

// CheckMode says which expected-sequence check an append carries.
type CheckMode uint8

// The check modes. See [ExpectLast] and [Fenced].
const (
	// CheckNone carries no check. Only posts and the events clients write
	// (see [Type.ClientWritten]) use it.
	CheckNone CheckMode = iota
	// CheckSubject expects Seq to be the last sequence on the event's own
	// subject (compare-and-set).
	CheckSubject
	// CheckFence expects Seq to be the last sequence on the thread's claim
	// subject: the writer's claim is still the newest. Under RUNFENCE
	// ([Subjects.RunFence]) only a guarded one is valid, and it is a
	// compare-and-set on the run subject expecting RunSeq (see
	// [FencedGuarded]).
	CheckFence
	// CheckUnfencedForTest drops the fence from a consuming append. It
	// exists to prove that the safety tests fail without the fence. Stores
	// refuse it unless the test helpers (eventstest.Unfenced) switched it
	// on, which no production binary can do: they are its only way in.
	CheckUnfencedForTest
)

// Check is the expected-sequence check an append carries.
type Check struct {
	Mode CheckMode
	Seq  uint64
	// Guarded, with [CheckFence], asks for the guard as well: the append
	// lands only if RunSeq is also the last sequence on the thread's run
	// subject. See [FencedGuarded].
	Guarded bool
	// RunSeq is the last run-subject sequence the writer has read; it
	// counts only when Guarded is set.
	RunSeq uint64
}

// ExpectLast is a compare-and-set on the event's own subject: the append lands
// only if seq is the subject's last sequence (0: the subject is empty).
func ExpectLast(seq uint64) Check { return Check{Mode: CheckSubject, Seq: seq} }

// Fenced is the fence: the append lands only while c's marker is the newest
// on the thread's claim subject. Under RUNFENCE ([Subjects.RunFence]) it is
// refused with [ErrInvalidEvent]: that fence needs the run subject's last
// sequence, so use [FencedGuarded].
func Fenced(c Claim) Check { return Check{Mode: CheckFence, Seq: c.Seq} }

// FencedGuarded is the fence plus the guard: the append lands only while c's
// marker is the newest on the claim subject and runSeq, the last run-subject
// sequence the writer has read, is still the run subject's last.
//
// The fence alone checks only the claim subject, so a writer with runner
// credentials can store a consuming event under the holder's claim between
// the holder's read and its own consuming write, and the holder's write
// still lands on top of it: an I1 or I3 violation written by an honest
// runner (issue 23). The guard closes that window. A store that guards
// refuses such an append with [ErrRunMoved] (wrapped with [ErrConflict]);
// a refused fence is still [ErrThreadBusy].
//
// Whether a store guards is its option: natsstore writes the guard as a
// second message in an atomic batch, which costs little on a replicated or
// memory stream and much on a single-replica file stream, where it is off
// by default; memstore always guards. A store that does not guard treats
// the append as [Fenced].
//
// Under the RUNFENCE layout ([Subjects.RunFence]), where markers are on the
// run subject, it is one compare-and-set on the run subject expecting
// runSeq (the holder's K), with no claim-subject header and no guard. A
// refusal is [ErrThreadBusy] when a marker (thread_claimed or
// thread_released) landed on the run subject after runSeq, and
// [ErrRunMoved] wrapped with [ErrConflict] otherwise.
func FencedGuarded(c Claim, runSeq uint64) Check {
	return Check{Mode: CheckFence, Seq: c.Seq, Guarded: true, RunSeq: runSeq}
}

// AppendOption sets optional per-call behaviour of Append.
type AppendOption func(*AppendOptions) error

// AppendOptions are the options an AppendOption sets. Stores read them.
type AppendOptions struct {
	// MsgID is the Nats-Msg-Id; a fresh one is made when empty.
	MsgID string
}

// WithMsgID sets the append's message id, so a caller can retry an append
// whose outcome is unknown without writing it twice. Ids are deduplicated
// stream-wide, so put the thread id in them. Deduplication holds only within
// the stream's window (2 minutes by default): after it, a retried fenced
// append whose claim is still the newest would be stored again, so retry
// late only after reading the log back.
func WithMsgID(id string) AppendOption {
	return func(o *AppendOptions) error {
		if id == "" {
			return fmt.Errorf("%w: empty message id", ErrInvalidEvent)
		}
		o.MsgID = id
		return nil
	}
}

// CheckAppend validates an append before a store writes it: ev has a body of
// a type other than message_posted, a valid thread, and the check its type
// requires (DESIGN §3). It returns the applied options.
func CheckAppend(ev *eventspb.Event, chk Check, opts []AppendOption) (AppendOptions, error) {
	var o AppendOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	if err := Validate(ev); err != nil {
		return o, err
	}
	t := TypeOf(ev)
	switch {
	case t == TypeMessagePosted:
		return o, fmt.Errorf("%w: message_posted is written by Post", ErrInvalidEvent)
	case t.ClientWritten():
		return o, checkClientWritten(ev, t, chk)
	case t.Fenced() && chk.Mode == CheckUnfencedForTest:
		if !unfence.Allowed() {
			return o, fmt.Errorf("%w: the fence can only be switched off in tests (eventstest.Unfenced)", ErrInvalidEvent)
		}
	case t.Fenced() && chk.Mode != CheckFence:
		return o, fmt.Errorf("%w: %s must be fenced by the writer's claim", ErrInvalidEvent, t)
	case !t.Fenced() && chk.Mode != CheckSubject:
		return o, fmt.Errorf("%w: %s needs a compare-and-set on its subject", ErrInvalidEvent, t)
	}
	if chk.Guarded && chk.Mode != CheckFence {
		return o, fmt.Errorf("%w: %s: only a fenced append can be guarded", ErrInvalidEvent, t)
	}
	if t.Fenced() && ev.GetClaimSeq() != chk.Seq {
		return o, fmt.Errorf("%w: %s claim_seq %d differs from its fence %d", ErrInvalidEvent, t, ev.GetClaimSeq(), chk.Seq)
	}
	return o, nil
}
