package eventstest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// RunPartitionReads checks the per-partition reads of the read models'
// port on s, a store with more than one partition on an empty log: each
// partition's last and next sequences, and a durable consumer of one name
// on each partition's stream, read, reported and deleted apart.
func RunPartitionReads(t *testing.T, s ReadModelStore) {
	t.Helper()
	ctx := context.Background()
	subj := s.Subjects()
	n := subj.PartitionCount()
	if n < 2 {
		t.Fatalf("RunPartitionReads needs a partitioned store, not %d partition", n)
	}
	// Partition p gets p+1 posts, so each stream's sequences are its own.
	for p := range n {
		th := ""
		for i := 0; th == ""; i++ {
			if c := fmt.Sprintf("pr%d", i); subj.PartitionOf(c) == p {
				th = c
			}
		}
		for m := range p + 1 {
			if _, err := s.Post(ctx, th, &eventspb.MessagePosted{MessageId: fmt.Sprint("m", m), Text: "hi"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for p := range n {
		last, err := s.LastPartitionSeq(ctx, p)
		if err != nil || last != uint64(p+1) {
			t.Fatalf("partition %d: last seq %d, %v; want %d", p, last, err, p+1)
		}
		if next, ok, err := s.NextPartitionSeq(ctx, p, 1); err != nil || !ok || next != 1 {
			t.Fatalf("partition %d: next from 1: %d %v %v", p, next, ok, err)
		}
		if _, ok, err := s.NextPartitionSeq(ctx, p, last+1); err != nil || ok {
			t.Fatalf("partition %d: next past the last: %v %v", p, ok, err)
		}
	}
	if _, err := s.LastPartitionSeq(ctx, n); !errors.Is(err, events.ErrLayout) {
		t.Fatalf("partition %d of %d: %v, want ErrLayout", n, n, err)
	}
	// One name, a consumer on each stream: each delivers its own
	// partition's events and reports its own state.
	const name = "per-partition"
	for p := range n {
		d, err := s.OpenDurable(ctx, events.DurableConfig{Name: name, Filter: subj.PartitionAll(p)})
		if err != nil {
			t.Fatal(err)
		}
		ds, err := d.Fetch(ctx, 100, 0)
		if err != nil || len(ds) != p+1 {
			t.Fatalf("partition %d's durable fetched %d events, %v; want %d", p, len(ds), err, p+1)
		}
		if err := d.Ack(ctx, ds[len(ds)-1]); err != nil {
			t.Fatal(err)
		}
	}
	for p := range n {
		info, err := s.PartitionDurableState(ctx, p, name)
		if err != nil || info.AckFloor != uint64(p+1) {
			t.Fatalf("partition %d's durable: %+v, %v; want ack floor %d", p, info, err, p+1)
		}
	}
	if err := s.DeletePartitionDurable(ctx, 1, name); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PartitionDurableState(ctx, 1, name); !errors.Is(err, events.ErrNotFound) {
		t.Fatalf("partition 1's durable after its delete: %v, want ErrNotFound", err)
	}
	for _, p := range []int{0, 2} {
		if _, err := s.PartitionDurableState(ctx, p, name); err != nil {
			t.Fatalf("partition %d's durable went with partition 1's: %v", p, err)
		}
	}
	if err := s.DeleteDurable(ctx, name); err != nil {
		t.Fatal(err)
	}
	for p := range n {
		if _, err := s.PartitionDurableState(ctx, p, name); !errors.Is(err, events.ErrNotFound) {
			t.Fatalf("partition %d's durable after DeleteDurable: %v", p, err)
		}
	}
}
