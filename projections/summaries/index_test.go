package summaries_test

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"testing"
	"time"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections/summaries"
)

// indexEnv is a server with n threads of one post each, and a client.
func indexEnv(t *testing.T, n int) (*natsstore.Store, *client.Client) {
	t.Helper()
	srv := natsembedtest.RunForTest(t)
	ctx := context.Background()
	store, err := natsstore.New(ctx, natsstore.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	c, err := client.Dial(ctx, client.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for i := range n {
		if _, err := c.Post(ctx, fmt.Sprintf("t%03d", i), "hello"); err != nil {
			t.Fatal(err)
		}
	}
	return store, c
}

func follow(c *client.Client) summaries.Follow {
	return func(ctx context.Context, from []uint64) iter.Seq2[events.Envelope, error] {
		return c.WatchAll(ctx, from)
	}
}

// waitTotal waits until the index lists want threads.
func waitTotal(t *testing.T, ix *summaries.Index, want int) {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("%d threads in the index", want), func() (bool, string) {
		p := ix.Query(summaries.Query{Limit: 1})
		return p.Total == want, fmt.Sprintf("total %d at seq %d", p.Total, p.Seq)
	})
}

func TestIndex_withoutReadModelFoldsTheStream(t *testing.T) {
	store, c := indexEnv(t, 30)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ix := summaries.NewIndex(store, "", follow(c))
	ix.Start(ctx)
	if err := ix.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	waitTotal(t, ix, 30)

	// Pages are stable and disjoint, in the order asked for.
	byID := func(a, b *summaries.Summary) int { return 0 }
	p1 := ix.Query(summaries.Query{Compare: byID, Offset: 0, Limit: 20})
	p2 := ix.Query(summaries.Query{Compare: byID, Offset: 20, Limit: 20})
	if p1.Total != 30 || len(p1.Summaries) != 20 || len(p2.Summaries) != 10 {
		t.Fatalf("pages: %d+%d of %d", len(p1.Summaries), len(p2.Summaries), p1.Total)
	}
	if p1.Summaries[0].Thread != "t000" || p2.Summaries[0].Thread != "t020" || p2.Summaries[9].Thread != "t029" {
		t.Fatalf("order: %s, %s, %s", p1.Summaries[0].Thread, p2.Summaries[0].Thread, p2.Summaries[9].Thread)
	}
	desc := ix.Query(summaries.Query{Desc: true, Limit: 1})
	if desc.Summaries[0].Thread != "t029" {
		t.Fatalf("desc first: %s", desc.Summaries[0].Thread)
	}
	odd := ix.Query(summaries.Query{Keep: func(s *summaries.Summary) bool { return s.Thread[3]%2 == 1 }})
	if odd.Total != 15 {
		t.Fatalf("filtered total %d, want 15", odd.Total)
	}
	if s, ok := ix.Get("t007"); !ok || s.Messages != 1 || s.Pending != 1 {
		t.Fatalf("t007: %+v %v", s, ok)
	}

	// A post after the start reaches it live, and wakes a subscriber.
	woke, stop := ix.Subscribe()
	defer stop()
	if _, err := c.Post(ctx, "t007", "again"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Post(ctx, "new", "hi"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woke:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up after a post")
	}
	waitTotal(t, ix, 31)
	testkit.WaitFor(t, 10*time.Second, "t007's second post", func() (bool, string) {
		s, _ := ix.Get("t007")
		return s.Messages == 2, fmt.Sprint(s.Messages)
	})
}

func TestIndex_startsFromTheReadModel(t *testing.T) {
	store, c := indexEnv(t, 12)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := summaries.NewProjector(summaries.Config{Store: store, Owner: "test", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	last, err := store.LastStreamSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CatchUp(ctx, last); err != nil {
		t.Fatal(err)
	}
	// A follow that yields nothing: all the index knows comes from the
	// bucket, so 12 threads prove it read the read model.
	none := func(ctx context.Context, from []uint64) iter.Seq2[events.Envelope, error] {
		if len(from) != 1 || from[0] != last+1 {
			t.Errorf("follow from %v, want [%d]: the bucket's snapshot is exact at the stream's last", from, last+1)
		}
		return func(yield func(events.Envelope, error) bool) { <-ctx.Done() }
	}
	ix := summaries.NewIndex(store, "", none)
	ix.Start(ctx)
	if err := ix.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	waitTotal(t, ix, 12)
	if ix.Seq() != last {
		t.Fatalf("seq %d, want %d", ix.Seq(), last)
	}
	_ = c
}

func TestIndex_waitSaysWhyWhenItCannotRead(t *testing.T) {
	store, c := indexEnv(t, 1)
	store.Close() // every read now fails
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ix := summaries.NewIndex(store, "", follow(c))
	ix.Start(ctx)
	if err := ix.Wait(ctx); err == nil {
		t.Fatal("Wait on a closed store: no error")
	}
}
