package natsstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
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

// leaderWait bounds how long SpreadLeaders waits for a moved leader.
const leaderWait = 10 * time.Second

// SpreadLeaders moves the partition streams' leaders so that no server
// leads more than ⌈P/N⌉ of them, N the servers holding their replicas:
// JetStream places each stream's leader on its own, at random, so six
// partitions on three servers can all be led by one. A move is a leader
// step-down naming a current replica as the preferred leader; the writes
// in flight then stall for a moment and are retried. It returns the
// partitions each server leads afterwards. Without partitions, or on
// single-replica streams, it moves nothing.
func (s *Store) SpreadLeaders(ctx context.Context) (map[string][]int, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	leaders, infos, err := s.leaders(ctx)
	if err != nil || len(s.streams) < 2 {
		return leaders, err
	}
	count := map[string]int{}
	for _, info := range infos {
		if info == nil {
			continue
		}
		count[info.Leader]++
		for _, r := range info.Replicas {
			count[r.Name] += 0
		}
	}
	if len(count) < 2 {
		return leaders, nil
	}
	limit := (len(s.streams) + len(count) - 1) / len(count)
	moved := false
	for p, info := range infos {
		if info == nil || count[info.Leader] <= limit {
			continue
		}
		to := ""
		for _, r := range info.Replicas {
			if r.Current && !r.Offline && count[r.Name] < limit && (to == "" || count[r.Name] < count[to]) {
				to = r.Name
			}
		}
		if to == "" {
			continue
		}
		if err := s.stepDown(ctx, s.streamName(p), to); err != nil {
			return leaders, err
		}
		count[info.Leader]--
		count[to]++
		moved = true
	}
	if !moved {
		return leaders, nil
	}
	// Wait for the elections, then report where the leaders are.
	deadline := time.Now().Add(leaderWait)
	for {
		leaders, infos, err = s.leaders(ctx)
		if err == nil && !slices.Contains(infos, nil) || time.Now().After(deadline) {
			return leaders, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// leaders returns the partitions each server leads, and each partition
// stream's cluster info (nil for one without a leader now).
func (s *Store) leaders(ctx context.Context) (map[string][]int, []*jetstream.ClusterInfo, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	out := map[string][]int{}
	infos := make([]*jetstream.ClusterInfo, len(s.streams))
	for p, st := range s.streams {
		info, err := st.Info(ctx)
		if err != nil {
			return nil, nil, unavailable("stream info of "+s.streamName(p), err)
		}
		if c := info.Cluster; c != nil && c.Leader != "" {
			infos[p] = c
			out[c.Leader] = append(out[c.Leader], p)
		}
	}
	return out, infos, nil
}

// stepDown asks stream's leader to step down in favour of server to.
func (s *Store) stepDown(ctx context.Context, stream, to string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	body, err := json.Marshal(map[string]any{"placement": map[string]string{"preferred": to}})
	if err != nil {
		return err
	}
	resp, err := s.nc.RequestWithContext(ctx, s.api.subject("STREAM.LEADER.STEPDOWN."+stream), body)
	if err != nil {
		return unavailable("move the leader of "+stream+" to "+to, err)
	}
	var r struct {
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return fmt.Errorf("natsstore: move the leader of %s: bad reply: %w", stream, err)
	}
	if r.Error != nil {
		return fmt.Errorf("natsstore: move the leader of %s to %s: %w", stream, to, r.Error)
	}
	return nil
}
