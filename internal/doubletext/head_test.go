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
