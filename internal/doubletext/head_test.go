package doubletext_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/internal/doubletext"
)

// noLoad is a store whose Load fails: a post must not need it.
type noLoad struct{ *memstore.Store }

func (noLoad) Load(context.Context, string, uint64) ([]events.Envelope, error) {
	return nil, errors.New("the post loaded the thread")
}

// A post reads the thread's head, never the thread: the reject check, the
// thread's strategy and a repost while busy, with no Load.
func TestPoster_Post_readsOnlyTheHead(t *testing.T) {
	ms := memstore.New(memstore.Config{})
	p := doubletext.Poster{Store: noLoad{ms}}
	ctx := context.Background()
	first, err := p.Post(ctx, "t", &eventspb.MessagePosted{MessageId: "a", Text: "a", Strategy: "reject"})
	if err != nil {
		t.Fatal(err)
	}
	startRun(t, ms, "t", first.Seq)
	if _, err := p.Post(ctx, "t", &eventspb.MessagePosted{MessageId: "b", Text: "b"}); !errors.Is(err, events.ErrThreadBusy) {
		t.Fatalf("a post naming none while busy, the thread's first post reject: %v, want ErrThreadBusy", err)
	}
	if ack, err := p.Post(ctx, "t", &eventspb.MessagePosted{MessageId: "a", Text: "a"}); err != nil || !ack.Duplicate || ack.Seq != first.Seq {
		t.Fatalf("a repost while busy: %+v %v, want the original", ack, err)
	}
	if _, err := doubletext.Configure(ctx, ms, "t", events.StrategyEnqueue, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Post(ctx, "t", &eventspb.MessagePosted{MessageId: "c", Text: "c"}); err != nil {
		t.Fatalf("after configure enqueue: %v", err)
	}
}

// strategyPoster is a store that posts under the thread's strategy itself
// when decide is set, and leaves the post to the Poster when not.
type strategyPoster struct {
	*memstore.Store
	decide bool
	calls  int
}

func (s *strategyPoster) PostThreadStrategy(_ context.Context, _ string, _ *eventspb.MessagePosted, _ ...events.PostOption) (events.Ack, bool, error) {
	s.calls++
	if !s.decide {
		return events.Ack{}, false, nil
	}
	return events.Ack{Seq: 99}, true, nil
}

// A post naming no strategy is the store's when it is a StrategyPoster that
// decides; one it leaves undecided, or one naming a strategy, is the
// Poster's.
func TestPoster_Post_strategyPoster(t *testing.T) {
	ctx := context.Background()
	s := &strategyPoster{Store: memstore.New(memstore.Config{}), decide: true}
	p := doubletext.Poster{Store: s}
	if ack, err := p.Post(ctx, "t", &eventspb.MessagePosted{Text: "a"}); err != nil || ack.Seq != 99 || s.calls != 1 {
		t.Fatalf("decided: %+v %v after %d calls, want the store's ack", ack, err, s.calls)
	}
	if _, err := p.Post(ctx, "t", &eventspb.MessagePosted{Text: "b", Strategy: "enqueue"}); err != nil || s.calls != 1 {
		t.Fatalf("a post naming its strategy: %v, %d calls, want none", err, s.calls)
	}
	s.decide = false
	if _, err := p.Post(ctx, "t", &eventspb.MessagePosted{Text: "c"}); err != nil || s.calls != 2 {
		t.Fatalf("undecided: %v after %d calls", err, s.calls)
	}
	got := posts(t, s.Store, "t")
	if len(got) != 2 || got[1].GetText() != "c" || got[1].GetStrategy() != "enqueue" {
		t.Fatalf("posts %v, want b and c, c under enqueue", got)
	}
}
