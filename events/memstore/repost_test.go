package memstore

import (
	"context"
	"errors"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// TestStore_Post_repostConflict: as in natsstore, reposting an id with the
// same text is a duplicate, with another text or author a conflict, and a
// malformed id is refused.
func TestStore_Post_repostConflict(t *testing.T) {
	s := New(Config{})
	ctx := context.Background()
	first, err := s.Post(ctx, "T", &eventspb.MessagePosted{MessageId: "m1", Author: "ann", Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Post(ctx, "T", &eventspb.MessagePosted{MessageId: "m1", Author: "ann", Text: "hello"})
	if err != nil || !again.Duplicate || again.Seq != first.Seq {
		t.Fatalf("same repost: %+v, %v", again, err)
	}
	for _, m := range []*eventspb.MessagePosted{
		{MessageId: "m1", Author: "ann", Text: "goodbye"},
		{MessageId: "m1", Author: "bob", Text: "hello"},
	} {
		if _, err := s.Post(ctx, "T", m); !errors.Is(err, events.ErrConflict) {
			t.Errorf("repost of m1 as %q by %q: %v, want ErrConflict", m.Text, m.Author, err)
		}
	}
	if _, err := s.Post(ctx, "T", &eventspb.MessagePosted{MessageId: "a:b", Text: "x"}); !errors.Is(err, events.ErrInvalidEvent) {
		t.Errorf("post with message id a:b: %v, want ErrInvalidEvent", err)
	}
	envs, err := s.Load(ctx, "T", 1)
	if err != nil || len(envs) != 1 {
		t.Fatalf("%d events stored (%v), want 1", len(envs), err)
	}
}
