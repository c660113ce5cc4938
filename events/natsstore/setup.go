package natsstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
)

// markerTTL is how long the bucket keeps the marker the server writes when
// a lease's TTL runs out. Watchers see the expiry through it; Acquire reads
// an expired marker, or no message at all, as a free lease.
const markerTTL = 15 * time.Minute

// streamConfig is the stream New creates: the audit log keeps everything
// (DESIGN §2), so deletes, purges, rollups, ages and per-message TTLs are
// all off.
func (s *Store) streamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              s.cfg.Stream,
		Description:       "artifactr thread events (audit log: never delete, purge, roll up or expire)",
		Subjects:          []string{s.subj.All()},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          s.cfg.Replicas,
		Duplicates:        s.cfg.DuplicateWindow,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxAge:            0,
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        -1,
		// Runners need a few consumers each (the follow, the lease watch,
		// the work queue), never one per thread; no cap to trip over.
		MaxConsumers:       -1,
		Discard:            jetstream.DiscardOld,
		DenyDelete:         true,
		DenyPurge:          true,
		AllowRollup:        false,
		AllowMsgTTL:        false,
		AllowAtomicPublish: true,
		// Loads read with batched direct gets instead of a consumer each.
		AllowDirect: true,
	}
}

// where names the server the store is connected to, for errors.
func (s *Store) where() string {
	if u := s.nc.ConnectedUrlRedacted(); u != "" {
		return u
	}
	return s.cfg.URL
}

// overlapError names the streams whose subjects overlap the artifactr
// stream's, which the server refused to create (10065): JetStream lets one
// stream hold a subject, and another application's holds some of ours.
func (s *Store) overlapError(ctx context.Context, err error) error {
	var names []string
	for _, subj := range s.streamConfig().Subjects {
		l := s.js.StreamNames(ctx, jetstream.WithStreamListSubject(subj))
		for n := range l.Name() {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("natsstore: create stream %s on %v: another stream holds some of these subjects: %w",
			s.cfg.Stream, s.streamConfig().Subjects, err)
	}
	return fmt.Errorf("natsstore: create stream %s on %v: stream %s already holds overlapping subjects (JetStream gives a subject to one stream): change that stream's subjects, or run artifactr under another subject prefix, account or server: %w",
		s.cfg.Stream, s.streamConfig().Subjects, strings.Join(names, ", "), err)
}

func (s *Store) ensureStream(ctx context.Context) error {
	st, err := s.js.Stream(ctx, s.cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) && s.cfg.NoCreate {
		return &notSetUp{fmt.Sprintf("natsstore: no artifactr stream %s at %s", s.cfg.Stream, s.where())}
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		st, err = s.js.CreateStream(ctx, s.streamConfig())
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			// Created meanwhile by another process: check theirs.
			st, err = s.js.Stream(ctx, s.cfg.Stream)
		}
		if apiCode(err) == 10065 { // subjects overlap with an existing stream
			return s.overlapError(ctx, err)
		}
	}
	if err != nil {
		return err
	}
	s.stream = st
	s.direct = directReads(st.CachedInfo().Config)
	s.dupWindow = st.CachedInfo().Config.Duplicates
	if err := s.checkStream(st.CachedInfo().Config); err != nil {
		return err
	}
	s.guard, err = s.cfg.Guard.guards(st.CachedInfo().Config)
	return err
}

// checkStream refuses an existing stream whose config could lose events or
// let an older claim marker become the last one again (DESIGN §2), and warns
// about settings that are merely unexpected.
func (s *Store) checkStream(c jetstream.StreamConfig) error {
	var bad []string
	want := s.subj.All()
	if !slices.Equal(c.Subjects, []string{want}) {
		bad = append(bad, fmt.Sprintf("subjects %v, want [%s]", c.Subjects, want))
	}
	if c.Retention != jetstream.LimitsPolicy {
		bad = append(bad, fmt.Sprintf("retention %s removes events", c.Retention))
	}
	if c.MaxAge != 0 {
		bad = append(bad, fmt.Sprintf("max age %s expires events", c.MaxAge))
	}
	if c.MaxMsgs > 0 || c.MaxBytes > 0 || c.MaxMsgsPerSubject > 0 {
		bad = append(bad, fmt.Sprintf("limits (max msgs %d, bytes %d, per subject %d) drop events", c.MaxMsgs, c.MaxBytes, c.MaxMsgsPerSubject))
	}
	if !c.DenyDelete {
		bad = append(bad, "deletes allowed (want deny_delete)")
	}
	if !c.DenyPurge {
		bad = append(bad, "purges allowed (want deny_purge)")
	}
	if c.AllowRollup {
		bad = append(bad, "rollups allowed")
	}
	if c.AllowMsgTTL || c.SubjectDeleteMarkerTTL != 0 {
		bad = append(bad, "per-message TTL allowed")
	}
	if c.Sealed {
		bad = append(bad, "sealed")
	}
	if c.Mirror != nil {
		bad = append(bad, "a mirror (not writable)")
	}
	if c.SubjectTransform != nil {
		bad = append(bad, "a subject transform")
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: stream %s: %s; the store never changes an existing stream, fix it by hand",
			events.ErrUnsafeConfig, s.cfg.Stream, strings.Join(bad, "; "))
	}
	log := s.cfg.Logger
	if c.Storage != jetstream.FileStorage {
		log.Warn("natsstore: stream is in memory; events are lost when the server stops", "stream", c.Name)
	}
	if c.Replicas != s.cfg.Replicas {
		log.Warn("natsstore: stream replicas differ from config", "stream", c.Name, "replicas", c.Replicas, "config", s.cfg.Replicas)
	}
	if !c.AllowAtomicPublish {
		log.Warn("natsstore: stream has no atomic batch publish", "stream", c.Name)
	}
	return nil
}

func (s *Store) ensureBucket(ctx context.Context) error {
	_, err := s.js.KeyValue(ctx, s.cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && s.cfg.NoCreate {
		return &notSetUp{fmt.Sprintf("natsstore: stream %s at %s has no lease bucket %s", s.cfg.Stream, s.where(), s.cfg.Bucket)}
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		_, err = s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      s.cfg.Bucket,
			Description: "artifactr thread leases (liveness only; safety is the claim marker)",
			History:     1,
			// One key per thread ever leased plus one per live runner; a
			// released lease's delete marker expires after markerTTL.
			MaxBytes:     -1,
			MaxValueSize: 1 << 10, // a lease value is a few dozen bytes
			Storage:      jetstream.FileStorage,
			Replicas:     s.cfg.Replicas,
			// Turns on per-key TTL, so a dead holder's lease goes away by
			// itself (NATS-NOTES: KV leases and TTL).
			LimitMarkerTTL: markerTTL,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			err = nil // created meanwhile; checked below
		}
	}
	if err != nil {
		return err
	}
	st, err := s.js.Stream(ctx, s.kvStream)
	if err != nil {
		return err
	}
	c := st.CachedInfo().Config
	if !c.AllowMsgTTL || c.SubjectDeleteMarkerTTL <= 0 {
		return fmt.Errorf("%w: bucket %s has no per-key TTL (create it with LimitMarkerTTL); leases of dead holders would never expire server-side",
			events.ErrUnsafeConfig, s.cfg.Bucket)
	}
	if c.MaxAge != 0 {
		return fmt.Errorf("%w: bucket %s has a TTL of %s; lease TTLs are per key", events.ErrUnsafeConfig, s.cfg.Bucket, c.MaxAge)
	}
	return nil
}
