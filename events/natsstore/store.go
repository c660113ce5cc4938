package natsstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
)

// Store is the JetStream [events.Store]. It is safe for concurrent use.
type Store struct {
	cfg      Config
	nc       *nats.Conn
	ownConn  bool // the store dialled nc and closes it
	js       jetstream.JetStream
	streams  []jetstream.Stream // each partition's stream, for consumers and info
	subj     events.Subjects
	api      api    // JetStream API subjects, in cfg.Domain
	kvStream string // KV_<bucket>: the bucket's own stream
	kvPrefix string // $KV.<bucket>.: the leases' stored subjects
	kvPut    string // where lease writes are published (kvPrefix, or under the domain)
	maxEvent int    // effective event size limit
	direct   bool   // Load reads with direct gets (see directReads)
	guard    bool   // guarded appends write their guard (see GuardMode)

	muxOnce sync.Once
	rmux    *replyMux // requests' replies; made on first use
	muxErr  error
	snaps   snapshots
	ids     msgIDs
	firsts  firstPosts
	// dupWindow is the stream's deduplication window, as configured on
	// the stream (which may predate cfg.DuplicateWindow).
	dupWindow time.Duration
	closed    atomic.Bool
	// leasesReclaimed counts the unexplained leases this store took.
	leasesReclaimed atomic.Int64

	// send publishes one attempt. Tests replace it to lose acks; it is
	// nil outside tests.
	send SendFunc
}

var _ events.Store = (*Store)(nil)

// New connects (when cfg.URL is set) and creates or checks the stream and
// the lease bucket. It returns an error wrapping [events.ErrUnavailable] when
// the server cannot be reached within cfg.Timeout, one wrapping
// [events.ErrUnsafeConfig] when the stream or bucket exists with a
// configuration that would break the audit log or the leases (such as a
// stream that allows deletes, rollups or message TTLs; New never changes an
// existing stream: fix it by hand), and, with cfg.NoCreate, one wrapping
// [ErrNoStream] when either is missing.
func New(ctx context.Context, cfg Config) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Store{
		cfg:      cfg,
		subj:     events.Subjects{Prefix: cfg.Prefix, Partitions: cfg.Partitions, RunFence: cmp.Or(cfg.Fence, cfg.NewFence) == FenceRun},
		api:      newAPI(cfg.Domain),
		kvStream: "KV_" + cfg.Bucket,
		kvPrefix: kvStored(cfg.Bucket),
	}
	s.kvPut = s.api.kvPublish(cfg.Bucket)
	if err := s.connect(); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.setup(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) connect() error {
	s.nc, s.ownConn = s.cfg.Conn, false
	if s.cfg.URL != "" {
		// Connect tries each URL once, each bounded by Timeout, and never
		// retries in the background; once connected, reconnect forever:
		// a store outlives server restarts.
		nc, err := nats.Connect(s.cfg.URL, s.connectOptions()...)
		if err != nil {
			return fmt.Errorf("natsstore: connect to %s: %w: %w", s.cfg.URL, events.ErrUnavailable, err)
		}
		s.nc, s.ownConn = nc, true
	}
	js, err := s.api.newJetStream(s.nc)
	if err != nil {
		s.Close()
		return fmt.Errorf("natsstore: jetstream: %w", err)
	}
	s.js = js
	s.maxEvent = s.cfg.MaxEventBytes
	if limit := int(s.nc.MaxPayload()) - headerRoom; limit < s.maxEvent {
		s.cfg.Logger.Info("natsstore: event size limit lowered to fit the server's max payload",
			"max_event_bytes", limit, "configured", s.cfg.MaxEventBytes, "server_max_payload", s.nc.MaxPayload())
		s.maxEvent = limit
	}
	return nil
}

// setup creates or checks the stream and the bucket. A missing one under
// NoCreate is returned as is: its error says what is missing where.
func (s *Store) setup(ctx context.Context) error {
	if err := s.ensureStreams(ctx); err != nil {
		if errors.Is(err, ErrNoStream) || errors.Is(err, events.ErrLayout) {
			return err
		}
		return unavailable(fmt.Sprintf("set up stream %s", s.cfg.Stream), s.denied(err, s.createSubject(s.cfg.Stream)))
	}
	if err := s.ensureBucket(ctx); err != nil {
		if errors.Is(err, ErrNoStream) {
			return err
		}
		return unavailable(fmt.Sprintf("set up lease bucket %s", s.cfg.Bucket), s.denied(err, s.createSubject(s.kvStream)))
	}
	if _, err := s.idKV(ctx, !s.cfg.NoCreate); err != nil {
		s.cfg.Logger.Warn("natsstore: no message-id bucket; posts are idempotent within the deduplication window only",
			"bucket", s.cfg.MessageIDBucket, "err", err)
	}
	if s.cfg.NoCreate {
		// A read-only open: the index is looked for on first use.
	} else if _, err := s.ensureFirstPosts(ctx, true); err != nil {
		s.cfg.Logger.Warn("natsstore: no first-post bucket; runners remember every message id of the threads they hold",
			"bucket", s.cfg.FirstPostBucket, "err", err)
	}
	// Snapshots are a cache: without their bucket (a role that may not
	// create it, a read-only open) claims replay the whole thread.
	if _, err := s.snapshotKV(ctx, !s.cfg.NoCreate); err != nil {
		s.cfg.Logger.Warn("natsstore: no snapshot bucket; claims replay whole threads", "bucket", s.cfg.SnapshotBucket, "err", err)
	}
	return nil
}

// bound gives ctx the store's per-call timeout unless it has an earlier
// deadline.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= s.cfg.Timeout {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.cfg.Timeout)
}

func (s *Store) checkOpen() error {
	if s.closed.Load() {
		return fmt.Errorf("natsstore: %w", events.ErrClosed)
	}
	return nil
}

// Close closes the connection if the store opened it. It does not release
// leases. Later calls return [events.ErrClosed].
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	if s.ownConn && s.nc != nil {
		// Every write waits for its ack, so nothing is left to flush; a
		// plain close also ends open tails at once.
		s.nc.Close()
	}
	return nil
}

// MaxEventBytes is the effective limit on an encoded event: the configured
// one, lowered to fit the server's max payload.
func (s *Store) MaxEventBytes() int { return s.maxEvent }

// Subjects names the store's subjects: <prefix>.T.posted and the rest, or
// <prefix>.<p>.T.posted with partitions.
func (s *Store) Subjects() events.Subjects { return s.subj }

// Conn returns the store's connection.
func (s *Store) Conn() *nats.Conn { return s.nc }
