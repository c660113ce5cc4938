package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
)

// shortWindow is the deduplication window of the tests that outlive it.
const shortWindow = time.Second

// waitWindowPassed returns once the stream has forgotten a Nats-Msg-Id
// published now: a probe republished until its ack is no duplicate.
func waitWindowPassed(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	probe := fmt.Sprintf("probe-%d", time.Now().UnixNano())
	pub := func() *jetstream.PubAck {
		ev := &eventspb.Event{Thread: "probe", Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: probe, Text: "probe"}}}
		data, h, err := events.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		h[events.HeaderMsgID] = []string{"probe:" + probe}
		pa, err := js.PublishMsg(ctxT(t), &nats.Msg{Subject: "threads.probe.posted", Header: nats.Header(h), Data: data})
		if err != nil {
			t.Fatal(err)
		}
		return pa
	}
	pub()
	deadline := time.Now().Add(30 * time.Second)
	for pub().Duplicate {
		if time.Now().After(deadline) {
			t.Fatal("the stream's deduplication window never passed")
		}
		time.Sleep(50 * time.Millisecond) // a poll: the condition is the probe's ack
	}
}

func openShort(t *testing.T, srv *natsembed.Server) *Store {
	return open(t, srv, func(c *Config) { c.DuplicateWindow = shortWindow })
}

// A repost after the stream's deduplication window is a duplicate of the
// original, and the same id with another text a conflict: nothing written.
func TestStore_Post_repostAfterWindow(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := openShort(t, srv)
	_, js := connect(t, srv)
	th := eventstest.NewThread(t)
	a, err := s.Post(ctxT(t), th, &eventspb.MessagePosted{MessageId: "m1", Author: "test", Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	waitWindowPassed(t, js)
	eventstest.CheckRepostForever(t, s, th, "m1", "hello", a.Seq)
}

// The ids live in a bucket: a restarted server still knows them.
func TestStore_Post_repostAcrossRestart(t *testing.T) {
	cfg := natsembed.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", NoSync: true}
	srv, err := natsembed.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := openShort(t, srv)
	th := eventstest.NewThread(t)
	first := post(t, s, th, "m1")
	s.Close()
	srv.Shutdown()
	srv, err = natsembed.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	s = openShort(t, srv)
	_, js := connect(t, srv)
	waitWindowPassed(t, js)
	a, err := s.Post(ctxT(t), th, &eventspb.MessagePosted{MessageId: "m1", Author: "test", Text: "hello m1"})
	if err != nil || !a.Duplicate || a.Seq != first {
		t.Fatalf("repost after a restart: %+v %v, want a duplicate of %d", a, err, first)
	}
}

// Two clients post one id at once: one message. With different texts, one
// wins and the other is a conflict.
func TestStore_Post_concurrentSameID(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	a, b := openShort(t, srv), openShort(t, srv)
	for _, texts := range [][2]string{{"same", "same"}, {"one", "other"}} {
		th := eventstest.NewThread(t)
		var wg sync.WaitGroup
		acks := make([]events.Ack, 2)
		errs := make([]error, 2)
		for i, s := range []*Store{a, b} {
			wg.Go(func() {
				acks[i], errs[i] = s.Post(ctxT(t), th, &eventspb.MessagePosted{MessageId: "m1", Text: texts[i]})
			})
		}
		wg.Wait()
		if n := countPosts(t, a, th); n != 1 {
			t.Fatalf("%v: %d messages stored, want 1 (acks %+v, errs %v)", texts, n, acks, errs)
		}
		if texts[0] == texts[1] {
			if errs[0] != nil || errs[1] != nil || acks[0].Seq != acks[1].Seq || acks[0].Duplicate == acks[1].Duplicate {
				t.Fatalf("same text: acks %+v errs %v, want one original and one duplicate", acks, errs)
			}
			continue
		}
		conflicts := 0
		for _, err := range errs {
			if errors.Is(err, events.ErrConflict) {
				conflicts++
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if conflicts != 1 {
			t.Fatalf("other texts: errs %v, want one conflict", errs)
		}
	}
}

func countPosts(t *testing.T, s *Store, th string) int {
	n := 0
	for _, e := range load(t, s, th) {
		if e.Type == events.TypeMessagePosted {
			n++
		}
	}
	return n
}

// A poster that died between its id key and recording the post's
// sequence: a repost past the window finds the original on the thread's
// posted subject, not a second message. One that died before it
// published: the repost is the message.
func TestStore_Post_staleIDKey(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := openShort(t, srv)
	_, js := connect(t, srv)
	kv, err := js.KeyValue(ctxT(t), DefaultMessageIDBucket)
	if err != nil {
		t.Fatal(err)
	}
	th := eventstest.NewThread(t)
	m := &eventspb.MessagePosted{MessageId: "m1", Text: "hello"}
	first, err := s.Post(ctxT(t), th, m)
	if err != nil {
		t.Fatal(err)
	}
	post(t, s, th, "other") // the original is not the subject's last post
	unrecorded, _ := json.Marshal(idRecord{Digest: postDigest(m)})
	if _, err := kv.Put(ctxT(t), th+".m1", unrecorded); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctxT(t), th+".m2", unrecorded); err != nil { // died before its publish
		t.Fatal(err)
	}
	waitWindowPassed(t, js)
	// The key's creation time is what the window is judged by: make it old.
	s.cfg.Now = func() time.Time { return time.Now().Add(time.Hour) }
	a, err := s.Post(ctxT(t), th, m)
	if err != nil || !a.Duplicate || a.Seq != first.Seq {
		t.Fatalf("repost with an unrecorded key: %+v %v, want a duplicate of %d", a, err, first.Seq)
	}
	// The sequence is recorded without waiting for the ack.
	testkit.WaitFor(t, 10*time.Second, "the key to record the original", func() (bool, string) {
		e, err := kv.Get(ctxT(t), th+".m1")
		if err != nil {
			return false, err.Error()
		}
		var rec idRecord
		return json.Unmarshal(e.Value(), &rec) == nil && rec.Seq == first.Seq, string(e.Value())
	})
	a2, err := s.Post(ctxT(t), th, &eventspb.MessagePosted{MessageId: "m2", Text: "hello"})
	if err != nil || a2.Duplicate {
		t.Fatalf("post of an id whose poster died before publishing: %+v %v, want a new message", a2, err)
	}
	if n := countPosts(t, s, th); n != 3 {
		t.Fatalf("%d posts, want 3", n)
	}
}

// A post refused by its check (the reject strategy) frees its id: the id
// may then be posted with another text.
func TestStore_Post_refusedFreesID(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	th := eventstest.NewThread(t)
	m := post(t, s, th, "m0")
	c := claim(t, s, th, "h")
	if _, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "echo"), events.Fenced(c)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Post(ctxT(t), th, &eventspb.MessagePosted{MessageId: "m1", Text: "a"}, events.WithExpectRunSeq(0))
	if !errors.Is(err, events.ErrConflict) {
		t.Fatalf("post expecting an empty run subject: %v, want a conflict", err)
	}
	if _, err := s.Post(ctxT(t), th, &eventspb.MessagePosted{MessageId: "m1", Text: "b"}); err != nil {
		t.Fatalf("the id of a refused post, with another text: %v", err)
	}
}

// BenchmarkStore_Post measures a post with its message-id key against the
// same post without the bucket (the stream's window only).
func BenchmarkStore_Post(b *testing.B) {
	srv := natsembedtest.RunForTest(b)
	for _, keyed := range []bool{true, false} {
		b.Run(fmt.Sprintf("id_key=%v", keyed), func(b *testing.B) {
			s := open(b, srv)
			if !keyed {
				s.ids.mu.Lock()
				s.ids.kv, s.ids.missing = nil, true
				s.ids.mu.Unlock()
			}
			th := fmt.Sprintf("bench-%v", keyed)
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				if _, err := s.Post(ctx, th, &eventspb.MessagePosted{MessageId: fmt.Sprintf("m%d", i), Text: "hello"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
