package client_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/projections"
)

// The client takes the port: memstore's Store is a client.Store too.
var _ client.Store = (*memstore.Store)(nil)

// TestClient_New_memstore: a client made with New over a memstore, with a
// runner of the history agent on the same store, posts, waits for the run
// and reads the thread, as one made with Dial does over NATS.
func TestClient_New_memstore(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	store := memstore.New(memstore.Config{})
	r, err := runner.New(runner.Config{Store: store, Agent: history{}, ID: "mem", IdleTimeout: time.Hour,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Stop(context.WithoutCancel(ctx)); err != nil {
			t.Error(err)
		}
	})
	c := client.New(store)
	t.Cleanup(func() { c.Close() })

	p1, err := c.Post(ctx, "m1", "one", client.WithMessageID("one"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Wait(ctx, "m1", p1.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if want := "one after []"; res.Status != projections.RunCompleted || res.Output != want {
		t.Fatalf("first run: %s %q, want completed %q", res.Status, res.Output, want)
	}
	again, err := c.Post(ctx, "m1", "one", client.WithMessageID("one"))
	if err != nil || !again.Duplicate || again.Seq != p1.Seq {
		t.Fatalf("repost: %+v, %v; want a duplicate of %d", again, err, p1.Seq)
	}
	p2, err := c.Post(ctx, "m1", "two")
	if err != nil {
		t.Fatal(err)
	}
	res, err = c.Wait(ctx, "m1", p2.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if want := "two after [one]"; res.Output != want {
		t.Fatalf("second run: %q, want %q", res.Output, want)
	}
	th, err := c.Thread(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if len(th.Messages) != 2 || len(th.Runs) != 2 {
		t.Fatalf("thread: %d messages, %d runs; want 2 and 2", len(th.Messages), len(th.Runs))
	}
	if c.URL() != "" {
		t.Errorf("URL of a client made by New: %q, want empty", c.URL())
	}
}

// TestClient_PostLater_memstore: delayed posts keep to the port's bucket,
// so they work over memstore: stored, listed, then posted once due.
func TestClient_PostLater_memstore(t *testing.T) {
	ctx := t.Context()
	c := client.New(memstore.New(memstore.Config{}))
	t.Cleanup(func() { c.Close() })
	if _, found, err := c.DelayedPost(ctx, "", "d1", "m1"); err != nil || found {
		t.Fatalf("before any bucket: found %v, %v; want none", found, err)
	}
	now := time.Unix(1000, 0)
	d := client.Delayed{Thread: "d1", Run: "m1", Created: now, Due: now.Add(time.Minute),
		Messages: []client.DelayedMessage{{ID: "m1", Text: "later"}}}
	if _, created, err := c.PostLater(ctx, "", d); err != nil || !created {
		t.Fatalf("PostLater: created %v, %v", created, err)
	}
	if _, created, err := c.PostLater(ctx, "", d); err != nil || created {
		t.Fatalf("PostLater again: created %v, %v; want the stored one", created, err)
	}
	next, done, err := c.PostDue(ctx, "", now)
	if err != nil || len(done) != 0 || !next.Equal(d.Due) {
		t.Fatalf("PostDue before due: next %v, done %v, %v", next, done, err)
	}
	_, done, err = c.PostDue(ctx, "", d.Due)
	if err != nil || len(done) != 1 || done[0].Posted == 0 {
		t.Fatalf("PostDue when due: done %+v, %v", done, err)
	}
	pending, err := c.DelayedPosts(ctx, "", "d1")
	if err != nil || len(pending) != 0 {
		t.Fatalf("DelayedPosts after the post: %+v, %v; want none", pending, err)
	}
	envs, err := c.Events(ctx, "d1")
	if err != nil || len(envs) != 1 || envs[0].Event.GetMessagePosted().GetText() != "later" {
		t.Fatalf("d1's events: %v, %v; want the delayed post", envs, err)
	}
}
