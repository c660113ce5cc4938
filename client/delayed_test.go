package client_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events"
)

// TestClient_PostLater_retryConflictAndTwoDrainers: a delayed post is
// stored once (a retry returns it, the same run with other messages is a
// conflict), nothing is posted before it is due, and two clients draining
// the bucket at once post it once and agree on its sequence.
func TestClient_PostLater_retryConflictAndTwoDrainers(t *testing.T) {
	c1, store := logServer(t)
	c2, err := client.Dial(t.Context(), client.Config{URL: c1.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	now := time.Now()
	d := client.Delayed{Thread: "t1", Run: "m2", Created: now, Due: now.Add(time.Minute), Messages: []client.DelayedMessage{
		{ID: "m1", Text: "one", Strategy: "enqueue"}, {ID: "m2", Text: "two", Strategy: "enqueue"},
	}}
	if _, created, err := c1.PostLater(t.Context(), "", d); err != nil || !created {
		t.Fatalf("PostLater: created %v, %v", created, err)
	}
	if got, created, err := c2.PostLater(t.Context(), "", d); err != nil || created || !got.Pending() || got.Run != "m2" {
		t.Fatalf("a retried PostLater: %+v created %v, %v; want the stored one", got, created, err)
	}
	other := d
	other.Messages = []client.DelayedMessage{{ID: "m2", Text: "else"}}
	if _, _, err := c2.PostLater(t.Context(), "", other); !errors.Is(err, events.ErrConflict) {
		t.Fatalf("the same run with other messages: %v; want a conflict", err)
	}
	if _, done, err := c1.PostDue(t.Context(), "", now); err != nil || len(done) != 0 {
		t.Fatalf("drain before the due time: done %v, %v", done, err)
	}
	var wg sync.WaitGroup
	for _, c := range []*client.Client{c1, c2} {
		wg.Go(func() {
			if _, _, err := c.PostDue(t.Context(), "", now.Add(2*time.Minute)); err != nil {
				t.Errorf("PostDue: %v", err)
			}
		})
	}
	wg.Wait()
	envs, err := store.Load(t.Context(), "t1", 1)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, e := range envs {
		if e.Type == events.TypeMessagePosted {
			seqs = append(seqs, e.Seq)
		}
	}
	if len(seqs) != 2 {
		t.Fatalf("posted %d messages (seqs %v); want m1 and m2 once each", len(seqs), seqs)
	}
	got, found, err := c2.DelayedPost(t.Context(), "", "t1", "m2")
	if err != nil || !found || got.Posted != seqs[1] || got.Pending() {
		t.Fatalf("the key after the drains: %+v found %v, %v; want posted at %d", got, found, err, seqs[1])
	}
	if _, _, err := c1.CancelDelayed(t.Context(), "", "t1", "m2"); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := c1.DelayedPost(t.Context(), "", "t1", "m2"); got.Failed != "" || got.Posted != seqs[1] {
		t.Fatalf("a cancel after the post changed the key: %+v", got)
	}
}
