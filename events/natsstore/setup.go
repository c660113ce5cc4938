package natsstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
)

// markerTTL is how long the bucket keeps the marker the server writes when
// a lease's TTL runs out. Watchers see the expiry through it; Acquire reads
// an expired marker, or no message at all, as a free lease.
const markerTTL = 15 * time.Minute

// streamConfig is partition p's stream as New creates it: the audit log
// keeps everything (DESIGN §2), so deletes, purges, rollups, ages and
// per-message TTLs are all off. Its metadata records the layout.
func (s *Store) streamConfig(p int) jetstream.StreamConfig {
	meta := map[string]string{
		MetaPartitions: strconv.Itoa(s.cfg.Partitions),
		MetaPartition:  strconv.Itoa(p),
	}
	if s.subj.RunFence {
		meta[MetaFence] = string(FenceRun)
	}
	return jetstream.StreamConfig{
		Name:              s.streamName(p),
		Description:       "artifactr thread events (audit log: never delete, purge, roll up or expire)",
		Subjects:          []string{s.subj.PartitionAll(p)},
		Metadata:          meta,
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
func (s *Store) overlapError(ctx context.Context, p int, err error) error {
	cfg := s.streamConfig(p)
	var names []string
	for _, subj := range cfg.Subjects {
		l := s.js.StreamNames(ctx, jetstream.WithStreamListSubject(subj))
		for n := range l.Name() {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("natsstore: create stream %s on %v: another stream holds some of these subjects: %w",
			cfg.Name, cfg.Subjects, err)
	}
	return fmt.Errorf("natsstore: create stream %s on %v: stream %s already holds overlapping subjects (JetStream gives a subject to one stream): change that stream's subjects, or run artifactr under another subject prefix, account or server: %w",
		cfg.Name, cfg.Subjects, strings.Join(names, ", "), err)
}

// ensureStreams creates or checks every partition's stream. Replicated
// partition streams it created are given leaders on different servers
// (SpreadLeaders): a fresh deployment has no writes in flight to disturb.
func (s *Store) ensureStreams(ctx context.Context) error {
	s.streams = make([]jetstream.Stream, s.cfg.Partitions)
	s.direct = true
	created := 0
	for p := range s.streams {
		if err := s.ensureStream(ctx, p, &created); err != nil {
			return err
		}
	}
	if created > 1 && s.cfg.Replicas > 1 {
		leaders, err := s.SpreadLeaders(ctx)
		if err != nil {
			s.cfg.Logger.Warn("natsstore: could not spread the partitions' leaders", "err", err)
		} else {
			s.cfg.Logger.Info("natsstore: partition leaders", "by_server", fmt.Sprint(leaders))
		}
	}
	return nil
}

func (s *Store) ensureStream(ctx context.Context, p int, created *int) error {
	name := s.streamName(p)
	st, err := s.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) && s.cfg.NoCreate {
		if lerr := s.otherLayout(ctx); lerr != nil {
			return lerr
		}
		return &notSetUp{fmt.Sprintf("natsstore: no artifactr stream %s at %s", name, s.where())}
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		st, err = s.js.CreateStream(ctx, s.streamConfig(p))
		if err == nil {
			*created++
		}
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			// Created meanwhile by another process: check theirs.
			st, err = s.js.Stream(ctx, name)
		}
		if apiCode(err) == 10065 { // subjects overlap with an existing stream
			// Another partition count's streams hold our subjects?
			if lerr := s.otherLayout(ctx); lerr != nil {
				return lerr
			}
			return s.overlapError(ctx, p, err)
		}
	}
	if err != nil {
		return err
	}
	c := st.CachedInfo().Config
	if err := s.checkLayout(p, c); err != nil {
		return err
	}
	if err := s.checkFence(p, c); err != nil {
		return err
	}
	s.streams[p] = st
	// Loads read with direct gets only if every partition allows them.
	s.direct = s.direct && directReads(c)
	if p == 0 || c.Duplicates < s.dupWindow {
		s.dupWindow = c.Duplicates
	}
	if err := s.checkStream(p, c); err != nil {
		return err
	}
	// One guard mode for the store: it guards only if every partition's
	// stream does (partitions are opened in order, 0 first).
	g, err := s.cfg.Guard.guards(c)
	if err != nil {
		return err
	}
	s.guard = g && (p == 0 || s.guard)
	return nil
}

// checkStream refuses an existing stream whose config could lose events or
// let an older claim marker become the last one again (DESIGN §2), and warns
// about settings that are merely unexpected.
func (s *Store) checkStream(p int, c jetstream.StreamConfig) error {
	var bad []string
	want := s.subj.PartitionAll(p)
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
			events.ErrUnsafeConfig, c.Name, strings.Join(bad, "; "))
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
