package natsstore

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/natsembed"
)

// Issue 23, item 6: a write the server refuses for want of storage (10023)
// is a definite refusal, events.ErrNoStorage, not an unknown outcome: for a
// post and for a fenced append alike. Reads still work.
func TestStore_fullStoreRefusesDefinitely(t *testing.T) {
	srv, err := natsembed.Start(natsembed.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", NoSync: true,
		MaxStore: 2 << 20, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	s := open(t, srv)
	post(t, s, "T", "before")
	c := claim(t, s, "T", "A")
	_, js := connect(t, srv)
	if _, err := js.CreateStream(ctxT(t), jetstream.StreamConfig{Name: "FILLER", Subjects: []string{"filler.>"}}); err != nil {
		t.Fatal(err)
	}
	blob := make([]byte, 32<<10)
	for i := 0; ; i++ {
		_, err := js.Publish(ctxT(t), "filler.x", blob)
		if apiCode(err) == 10023 {
			break
		}
		if err != nil || i > 10_000 {
			t.Fatalf("filling: %d: %v", i, err)
		}
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, events.ErrNoStorage) || errors.Is(err, events.ErrUnavailable) || !strings.Contains(err.Error(), "not written: the server is out of storage") {
			t.Errorf("%s on a full store: %v, want a definite ErrNoStorage", what, err)
		}
	}
	_, err = s.Post(ctxT(t), "T", &eventspb.MessagePosted{Text: "refused", MessageId: "m2"})
	check("post", err)
	_, err = s.Append(ctxT(t), events.NewRunStarted(c, s.cfg.Now(), "r1", 1, "echo"), events.Fenced(c))
	check("fenced append", err)
	_, err = s.AppendBatch(ctxT(t), []BatchItem{{Event: events.NewRunStarted(c, s.cfg.Now(), "r1", 1, "echo"), Check: events.Fenced(c)}})
	check("batch", err)
	if n := len(load(t, s, "T")); n != 2 {
		t.Errorf("load on a full store: %d events, want the post and the marker", n)
	}
}
