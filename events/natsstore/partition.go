package natsstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
)

// Stream metadata keys recording the layout, so that a store opened with
// another partition count fails instead of reading the wrong stream. A
// stream without them predates partitions: it is the one stream of a
// one-partition layout.
const (
	MetaPartitions = "artifactr_partitions"
	MetaPartition  = "artifactr_partition"
)

// PartitionStream names partition p's stream in a layout of n partitions
// whose base stream name is stream: stream itself with one partition (the
// layout before partitions, unchanged), and <stream>-p<p> with more, such
// as ARTIFACTR-p3.
func PartitionStream(stream string, p, n int) string {
	if n <= 1 {
		return stream
	}
	return stream + "-p" + strconv.Itoa(p)
}

// streamName is partition p's stream.
func (s *Store) streamName(p int) string { return PartitionStream(s.cfg.Stream, p, s.cfg.Partitions) }

// threadStream is the stream thread's events are in.
func (s *Store) threadStream(thread string) string { return s.streamName(s.subj.PartitionOf(thread)) }

// Partitions returns the store's partition count.
func (s *Store) Partitions() int { return s.cfg.Partitions }

// StreamNames returns the stream of each partition, in partition order.
func (s *Store) StreamNames() []string {
	out := make([]string, s.cfg.Partitions)
	for p := range out {
		out[p] = s.streamName(p)
	}
	return out
}

// filterPartition returns the partition whose stream holds filter, or an
// error wrapping [events.ErrLayout] when it spans several: no one consumer
// can read across streams, so a reader of every partition reads each one.
func (s *Store) filterPartition(what, filter string) (int, error) {
	p, ok := s.subj.FilterPartition(filter)
	if !ok {
		return 0, fmt.Errorf("natsstore: %s: %w: filter %q is not within one of the %d partitions' streams; read each partition's filter (events.Subjects.PartitionAll)",
			what, events.ErrLayout, filter, s.cfg.Partitions)
	}
	return p, nil
}

// filterStream is the stream holding filter (see filterPartition).
func (s *Store) filterStream(what, filter string) (jetstream.Stream, error) {
	p, err := s.filterPartition(what, filter)
	if err != nil {
		return nil, err
	}
	return s.streams[p], nil
}

// onePartition refuses a whole-log call that has no meaning across several
// partitions' streams, whose sequences are each their own.
func (s *Store) onePartition(what string) error {
	if s.subj.Partitioned() {
		return fmt.Errorf("natsstore: %s: %w: the log has %d partition streams, each with its own sequences; ask one partition (%s)",
			what, events.ErrLayout, s.cfg.Partitions, "LastPartitionSeq")
	}
	return nil
}

// layoutOf returns the partition count and index a stream's metadata
// records; a stream without them is the one stream of the layout before
// partitions.
func layoutOf(c jetstream.StreamConfig) (n, p int, err error) {
	v, ok := c.Metadata[MetaPartitions]
	if !ok {
		return 1, 0, nil
	}
	if n, err = strconv.Atoi(v); err != nil || n < 1 {
		return 0, 0, fmt.Errorf("bad %s metadata %q", MetaPartitions, v)
	}
	if p, err = strconv.Atoi(c.Metadata[MetaPartition]); err != nil || p < 0 || p >= n {
		return 0, 0, fmt.Errorf("bad %s metadata %q", MetaPartition, c.Metadata[MetaPartition])
	}
	return n, p, nil
}

// checkLayout refuses stream p's existing config when it records another
// layout than the store's.
func (s *Store) checkLayout(p int, c jetstream.StreamConfig) error {
	n, got, err := layoutOf(c)
	if err != nil {
		return fmt.Errorf("natsstore: stream %s: %w: %w", c.Name, events.ErrLayout, err)
	}
	if n != s.cfg.Partitions || got != p {
		return fmt.Errorf("natsstore: %w: stream %s is partition %d of %d, but the store was opened with %d partitions (as partition %d): open it with --partitions %d",
			events.ErrLayout, c.Name, got, n, s.cfg.Partitions, p, n)
	}
	return nil
}

// otherLayout looks, when a partition's stream is missing (under NoCreate)
// or cannot be made (its subjects overlap another stream's), for the
// stream another partition count would have made, and returns an error
// wrapping [events.ErrLayout] naming that count if there is one: a store
// opened with one partition on a deployment of four must neither create a
// stream of its own nor report a mere missing stream. It returns nil when
// it finds none or cannot look (a role that may not read that stream: a
// denied request times out, so the look is bounded by a second).
func (s *Store) otherLayout(ctx context.Context) error {
	probe := PartitionStream(s.cfg.Stream, 0, 2) // a partitioned layout's first stream
	if s.subj.Partitioned() {
		probe = s.cfg.Stream // the one-partition layout's stream
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := s.js.Stream(ctx, probe)
	if err != nil {
		return nil
	}
	n, _, lerr := layoutOf(st.CachedInfo().Config)
	if lerr != nil {
		return fmt.Errorf("natsstore: stream %s: %w: %w", probe, events.ErrLayout, lerr)
	}
	return fmt.Errorf("natsstore: %w: the deployment at %s has %d partition(s) (stream %s), but the store was opened with %d: open it with --partitions %d",
		events.ErrLayout, s.where(), n, probe, s.cfg.Partitions, n)
}
