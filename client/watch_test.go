package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/memstore"
)

// With partitions, Watch("") follows every partition's stream: it yields
// the events already stored in each from its start, then new ones live,
// and breaking out of the loop stops every partition's follow.
func TestClient_Watch_partitions(t *testing.T) {
	const parts = 4
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := client.New(memstore.New(memstore.Config{Subjects: events.Subjects{Partitions: parts}}))
	t.Cleanup(func() { c.Close() })
	var ths []string
	seen := map[int]bool{}
	for i := 0; len(ths) < parts; i++ {
		th := fmt.Sprint("w", i)
		if p := events.Partition(th, parts); !seen[p] {
			seen[p] = true
			ths = append(ths, th)
		}
	}
	for _, th := range ths[:parts-1] {
		if _, err := c.Post(ctx, th, "before"); err != nil {
			t.Fatal(err)
		}
	}
	if seqs, err := c.LastSeqs(ctx); err != nil || len(seqs) != parts {
		t.Fatalf("LastSeqs: %v, %v", seqs, err)
	}
	got := map[string]int{}
	for env, err := range c.Watch(ctx, "", 1) {
		if err != nil {
			t.Fatal(err)
		}
		got[env.Thread]++
		if len(got) == parts-1 && got[ths[parts-1]] == 0 {
			// Every stored one came: now one written while watching.
			if _, err := c.Post(ctx, ths[parts-1], "live"); err != nil {
				t.Fatal(err)
			}
		}
		if len(got) == parts {
			break
		}
	}
	for _, th := range ths {
		if got[th] != 1 {
			t.Errorf("%s: %d events, want 1 (%v)", th, got[th], got)
		}
	}
	// A start per partition, and only as many as there are partitions.
	for _, err := range c.WatchAll(ctx, []uint64{1}) {
		if err == nil {
			t.Fatal("WatchAll with one start for four partitions did not fail")
		}
		break
	}
}
