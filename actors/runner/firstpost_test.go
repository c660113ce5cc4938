package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
)

// A repost of an old message id is never run, though the holder keeps no
// message id of the thread's past: its claim starts from a snapshot that
// holds none, and the store's first-post index finds the id's first post.
// An entry a forger wrote first, naming another post, makes the runner
// remember that id itself, in its view and its snapshots: the repost of
// it is not run either.
func TestRunner_repostOfAnOldID(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	ctx := context.Background()
	s, err := natsstore.New(ctx, natsstore.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	const th = "old-ids"
	rawPost := func(id, text string) uint64 {
		t.Helper()
		data, err := proto.Marshal(&eventspb.Event{Thread: th, Body: &eventspb.Event_MessagePosted{
			MessagePosted: &eventspb.MessagePosted{MessageId: id, Author: "late", Text: text}}})
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(s.Subjects().Thread(th, events.KindPosted))
		m.Header.Set(events.HeaderType, string(events.TypeMessagePosted))
		m.Data = data
		ack, err := js.PublishMsg(m)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	postID := func(id, text string) uint64 {
		t.Helper()
		ack, err := s.Post(ctx, th, &eventspb.MessagePosted{MessageId: id, Author: "test", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return ack.Seq
	}
	r := startRunner(t, runner.Config{Store: s, ID: "ids", IdleTimeout: 200 * time.Millisecond})
	t.Cleanup(r.Kill)
	// A forger's entry for id "p", naming the thread's first post, which
	// is no post of "p", before "p" is posted.
	first := postID("a", "one")
	if _, err := js.Publish("$KV."+natsstore.DefaultFirstPostBucket+"."+th+".p", fmt.Appendf(nil, "%d", first)); err != nil {
		t.Fatal(err)
	}
	postID("b", "two")
	postID("p", "three")

	idle := func(claims, saved int64) func() (bool, string) {
		return func() (bool, string) {
			st := r.Stats()
			return st.Held == 0 && st.Claims >= claims && st.SnapshotsSaved >= saved, fmt.Sprintf("%+v", st)
		}
	}
	testkit.WaitFor(t, 10*time.Second, "the first turns", settled(t, s, th))
	testkit.WaitFor(t, 10*time.Second, "an idle release with a snapshot", idle(1, 1))

	// The snapshot keeps one id: the forged entry's, which the index
	// cannot answer for. Not "a" or "b".
	data, err := s.LoadSnapshot(ctx, th)
	if err != nil || data == nil {
		t.Fatalf("no snapshot: %v", err)
	}
	if n := snapshotIDs(t, data); n != 1 {
		t.Fatalf("the snapshot keeps %d message ids, want 1 (the forged entry's)", n)
	}

	// Late reposts of "a" and "p", past every window: neither is run.
	ra := rawPost("a", "one, again")
	rp := rawPost("p", "three, again")
	fresh := postID("c", "four")
	testkit.WaitFor(t, 10*time.Second, "the new post's turn", settled(t, s, th))
	testkit.WaitFor(t, 10*time.Second, "the second idle release", idle(2, 1))
	// The second claim started from the snapshot, which holds no id of
	// "a", and the forged entry's "p" only in it.
	if st := r.Stats(); st.SnapshotsLoaded != 1 {
		t.Fatalf("stats %+v: want the second claim to start from the snapshot", st)
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	v := fold(t, s, th)
	for _, seq := range []uint64{ra, rp} {
		if _, ok := v.Reposts[seq]; !ok {
			t.Errorf("the post at %d is not a repost in the fold", seq)
		}
	}
	runs := map[uint64]int{}
	for _, run := range v.Runs {
		runs[run.PromptSeq]++
	}
	if runs[ra] != 0 || runs[rp] != 0 || runs[fresh] != 1 || len(v.Runs) != 4 {
		t.Fatalf("runs by prompt %v (%d runs): want one each for the 4 messages, none for the reposts %d and %d", runs, len(v.Runs), ra, rp)
	}
	auditClean(t, s, th)
}

// snapshotIDs returns how many message ids a compact snapshot keeps.
func snapshotIDs(t *testing.T, data []byte) int {
	t.Helper()
	var snap struct {
		State json.RawMessage `json:"state"`
	}
	var st struct {
		IDs []byte `json:"ids"`
	}
	if err := json.Unmarshal(data, &snap); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(snap.State, &st); err != nil {
		t.Fatal(err)
	}
	return len(st.IDs) / 16
}
