package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/memstore"
)

// With partitions each partition numbers its events from 1, as natsstore's
// streams do, and reads across partitions are refused as there.
func TestStore_partitionSequences(t *testing.T) {
	const n = 4
	s := memstore.New(memstore.Config{Subjects: events.Subjects{Partitions: n}})
	ctx := context.Background()
	seen := map[int]bool{}
	for i := 0; len(seen) < n; i++ {
		th := fmt.Sprintf("t%d", i)
		p := events.Partition(th, n)
		if seen[p] {
			continue
		}
		seen[p] = true
		ack, err := s.Post(ctx, th, &eventspb.MessagePosted{MessageId: "m1", Text: "hi"})
		if err != nil {
			t.Fatal(err)
		}
		if ack.Seq != 1 {
			t.Fatalf("%s, the first thread of partition %d, got seq %d, want 1", th, p, ack.Seq)
		}
		envs, err := s.Load(ctx, th, 1)
		if err != nil || len(envs) != 1 || envs[0].Subject != fmt.Sprintf("threads.%d.%s.posted", p, th) {
			t.Fatalf("%s: %+v %v", th, envs, err)
		}
		if last, err := s.LastPartitionSeq(ctx, p); err != nil || last != 1 {
			t.Fatalf("partition %d's last seq %d %v", p, last, err)
		}
	}
	if _, err := s.Tail(ctx, s.Subjects().All(), 1); !errors.Is(err, events.ErrLayout) {
		t.Fatalf("tail across partitions: %v, want ErrLayout", err)
	}
	if _, err := s.LastStreamSeq(ctx); !errors.Is(err, events.ErrLayout) {
		t.Fatalf("LastStreamSeq across partitions: %v, want ErrLayout", err)
	}
	if threads, err := s.Threads(ctx); err != nil || len(threads) != n {
		t.Fatalf("threads %v %v, want one per partition", threads, err)
	}
}

func TestStore_partitionReads(t *testing.T) {
	eventstest.RunPartitionReads(t, memstore.New(memstore.Config{Subjects: events.Subjects{Partitions: 4}}))
}
