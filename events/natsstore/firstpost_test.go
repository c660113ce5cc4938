package natsstore

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/internal/natsauth"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// The first-post index's contract on JetStream, on one stream and on four
// partitions' streams.
func TestStore_firstPosts(t *testing.T) {
	for _, p := range []int{1, 4} {
		t.Run(fmt.Sprintf("P%d", p), func(t *testing.T) {
			srv := natsembedtest.RunForTest(t)
			_, js := connect(t, srv)
			eventstest.RunFirstPosts(t, eventstest.FirstPostHarness{
				Harness: eventstest.Harness{
					Subjects: events.Subjects{Partitions: p},
					Open: func(t *testing.T, now func() time.Time) events.Store {
						return open(t, srv, func(c *Config) { c.Now, c.Partitions = now, p })
					},
					PublishRaw: publishRaw(js),
				},
				Forge: func(t *testing.T, thread, id string, seq uint64) {
					subj := "$KV." + DefaultFirstPostBucket + "." + thread + "." + id
					if _, err := js.Publish(ctxT(t), subj, strconv.AppendUint(nil, seq, 10)); err != nil {
						t.Fatalf("forge %s: %v", subj, err)
					}
				},
			})
		})
	}
}

// An entry is written once: the server refuses a second value, a delete
// marker, a purge of the key or of the stream, and a message deletion,
// whoever sends them. A forger with a runner's credentials can write an
// entry first, never change one.
func TestStore_firstPostWrittenOnce(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	_, js := connect(t, srv)
	s := open(t, srv)
	ack, err := s.Post(ctxT(t), "once", postOf("m1", "one"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.FirstPost(ctxT(t), "once", "m1", ack.Seq); err != nil || got != ack.Seq {
		t.Fatalf("FirstPost: %d, %v; want %d", got, err, ack.Seq)
	}
	subj := "$KV." + DefaultFirstPostBucket + ".once.m1"
	stream := "KV_" + DefaultFirstPostBucket
	if _, err := js.Publish(ctxT(t), subj, []byte("999")); err == nil {
		t.Error("a second value was stored")
	}
	del := nats.NewMsg(subj)
	del.Header.Set("KV-Operation", "DEL")
	if _, err := js.PublishMsg(ctxT(t), del); err == nil {
		t.Error("a delete marker was stored")
	}
	roll := nats.NewMsg(subj)
	roll.Header.Set("KV-Operation", "PURGE")
	roll.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	if _, err := js.PublishMsg(ctxT(t), roll); err == nil {
		t.Error("a purge (rollup) marker was stored")
	}
	st, err := js.Stream(ctxT(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctxT(t), jetstream.WithPurgeSubject(subj)); err == nil {
		t.Error("the key was purged")
	}
	if err := st.Purge(ctxT(t)); err == nil {
		t.Error("the stream was purged")
	}
	if err := st.DeleteMsg(ctxT(t), 1); err == nil {
		t.Error("the entry was deleted")
	}
	m, err := st.GetLastMsgForSubject(ctxT(t), subj)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != strconv.FormatUint(ack.Seq, 10) {
		t.Fatalf("the entry now names %q, want %d", m.Data, ack.Seq)
	}
	if got, err := s.FirstPost(ctxT(t), "once", "m1", ack.Seq); err != nil || got != ack.Seq {
		t.Fatalf("FirstPost after the attempts: %d, %v; want %d", got, err, ack.Seq)
	}
}

// A deployment from before the index (its bucket missing, opened without
// creating) answers 0, "cannot say": the runner then remembers ids as it
// did before.
func TestStore_firstPostNoBucket(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	_, js := connect(t, srv)
	s := open(t, srv)
	ack, err := s.Post(ctxT(t), "old", postOf("m1", "one"))
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctxT(t), "KV_"+DefaultFirstPostBucket); err != nil {
		t.Fatal(err)
	}
	ro := open(t, srv, func(c *Config) { c.NoCreate = true })
	got, err := ro.FirstPost(ctxT(t), "old", "m1", ack.Seq)
	if err != nil || got != 0 {
		t.Fatalf("FirstPost with no bucket: %d, %v; want 0, nil", got, err)
	}
	if _, err := ro.FirstPost(ctxT(t), "old", "bad id", ack.Seq); !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("a bad message id: %v, want ErrInvalidEvent", err)
	}
}

func postOf(id, text string) *eventspb.MessagePosted {
	return &eventspb.MessagePosted{MessageId: id, Author: "test", Text: text}
}

// Under the roles, runners write the index and every role reads it; a
// user that may not write it (here a client, as a runner would be under a
// roles file from before the index) gets "cannot say", not an error: the
// caller then remembers the id itself.
func TestStore_firstPostPermissions(t *testing.T) {
	srv, role := authServer(t)
	as := func(r natsauth.Role) func(*Config) {
		return func(c *Config) { c.ConnectOptions = []nats.Option{role[r]}; c.Timeout = 2 * time.Second }
	}
	open(t, srv, as(natsauth.Admin))
	client := open(t, srv, as(natsauth.Client))
	ack, err := client.Post(ctxT(t), "T", postOf("m1", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := client.FirstPost(ctxT(t), "T", "m1", ack.Seq); err != nil || got != 0 {
		t.Fatalf("FirstPost as client: %d, %v; want 0 (cannot say), nil", got, err)
	}
	runner := open(t, srv, as(natsauth.Runner))
	if got, err := runner.FirstPost(ctxT(t), "T", "m1", ack.Seq); err != nil || got != ack.Seq {
		t.Fatalf("FirstPost as runner: %d, %v; want %d", got, err, ack.Seq)
	}
	for _, r := range []natsauth.Role{natsauth.Auditor, natsauth.Client} {
		s := open(t, srv, as(r))
		if got, found, err := s.LookupFirstPost(ctxT(t), "T", "m1", ack.Seq); err != nil || !found || got != ack.Seq {
			t.Errorf("LookupFirstPost as %s: %d, %v, %v; want %d found", r, got, found, err, ack.Seq)
		}
	}
}
