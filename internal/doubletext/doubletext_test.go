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

func posts(t *testing.T, s events.Store, th string) []*eventspb.MessagePosted {
	t.Helper()
	envs, err := s.Load(context.Background(), th, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out []*eventspb.MessagePosted
	for _, e := range envs {
		if m := e.Event.GetMessagePosted(); m != nil {
			out = append(out, m)
		}
	}
	return out
}

// startRun makes a run active in th, as a holder would.
func startRun(t *testing.T, s events.Store, th string, prompt uint64) {
	t.Helper()
	c, _, err := events.AcquireClaim(context.Background(), s, th, "h", 10*time.Second, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(context.Background(), events.NewRunStarted(c, time.Now(), "r1", prompt, "a"), events.Fenced(c)); err != nil {
		t.Fatal(err)
	}
}

func TestPoster_Post_reject(t *testing.T) {
	s := memstore.New(memstore.Config{})
	p := doubletext.Poster{Store: s}
	ctx := context.Background()
	first, err := p.Post(ctx, "t", &eventspb.MessagePosted{Text: "a", Strategy: "reject"})
	if err != nil {
		t.Fatal(err)
	}
	startRun(t, s, "t", first.Seq)
	// The thread's strategy is reject (its first post's): a post naming
	// none is refused too.
	for _, st := range []string{"", "reject"} {
		_, err := p.Post(ctx, "t", &eventspb.MessagePosted{Text: "b", Strategy: st})
		if !errors.Is(err, events.ErrThreadBusy) {
			t.Fatalf("strategy %q while busy: err %v, want ErrThreadBusy", st, err)
		}
	}
	if _, err := p.Post(ctx, "t", &eventspb.MessagePosted{Text: "c", Strategy: "enqueue"}); err != nil {
		t.Fatal(err)
	}
	got := posts(t, s, "t")
	if len(got) != 2 || got[1].GetText() != "c" {
		t.Fatalf("posts %v, want a and c", got)
	}
}

// A post that names no strategy is stored with the thread's, as read.
func TestPoster_Post_namesTheThreadsStrategy(t *testing.T) {
	s := memstore.New(memstore.Config{})
	ctx := context.Background()
	if _, err := doubletext.Configure(ctx, s, "t", events.StrategyRollback, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := (doubletext.Poster{Store: s}).Post(ctx, "t", &eventspb.MessagePosted{Text: "a"}); err != nil {
		t.Fatal(err)
	}
	if got := posts(t, s, "t"); got[0].GetStrategy() != "rollback" {
		t.Fatalf("stored strategy %q, want rollback", got[0].GetStrategy())
	}
	if _, err := (doubletext.Poster{Store: s}).Post(ctx, "u", &eventspb.MessagePosted{Text: "a"}); err != nil {
		t.Fatal(err)
	}
	if got := posts(t, s, "u"); got[0].GetStrategy() != "enqueue" {
		t.Fatalf("stored strategy %q on a new thread, want enqueue", got[0].GetStrategy())
	}
}

func TestBadInput(t *testing.T) {
	s := memstore.New(memstore.Config{})
	ctx := context.Background()
	if _, err := doubletext.Configure(ctx, s, "t", "", time.Now()); err == nil {
		t.Error("configure with no strategy: no error")
	}
	if _, err := doubletext.Cancel(ctx, s, "t", "", "a:b", time.Now()); !errors.Is(err, events.ErrInvalidEvent) {
		t.Errorf("cancel with a bad id: %v", err)
	}
	if _, err := (doubletext.Poster{Store: s}).Post(ctx, "t", &eventspb.MessagePosted{Text: "a", Strategy: "shout"}); !errors.Is(err, events.ErrInvalidEvent) {
		t.Errorf("post with a bad strategy: %v", err)
	}
	if _, err := doubletext.Cancel(ctx, s, "bad id", "", "", time.Now()); !errors.Is(err, events.ErrInvalidThreadID) {
		t.Errorf("cancel on a bad thread id: %v", err)
	}
}
