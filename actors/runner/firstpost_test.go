package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
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

// racedIndex is a memstore whose index read says "no entry" for id
// "raced", and a forger's entry naming seq 1 lands right after: between
// the holder's read and its write of the entry.
type racedIndex struct {
	*memstore.Store
	raced atomic.Int32
}

func (r *racedIndex) LookupFirstPost(ctx context.Context, thread, id string, seq uint64) (uint64, bool, error) {
	if id == "raced" && r.raced.Add(1) == 1 {
		r.Log().ForgeFirstPost(thread, id, 1)
		return 0, false, nil
	}
	return r.Store.LookupFirstPost(ctx, thread, id, seq)
}

// A forger's entry written between the holder's read of the index and its
// own write of a new id's entry: the holder's write finds it, and the
// holder remembers the id itself, so a repost of it is never run, in this
// claim or the next, which starts from its snapshot.
func TestRunner_firstPostEntryRaced(t *testing.T) {
	log := memstore.NewLog()
	s := &racedIndex{Store: log.Open(memstore.Config{})}
	r := startRunner(t, runner.Config{Store: s, ID: "raced", IdleTimeout: 200 * time.Millisecond})
	t.Cleanup(r.Kill)
	const th = "raced"
	postID := func(id, text string) uint64 {
		t.Helper()
		ack, err := s.Post(context.Background(), th, &eventspb.MessagePosted{MessageId: id, Author: "test", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return ack.Seq
	}
	rawRepost := func(id string) uint64 {
		data, err := proto.Marshal(&eventspb.Event{Thread: th, Body: &eventspb.Event_MessagePosted{
			MessagePosted: &eventspb.MessagePosted{MessageId: id, Author: "late", Text: "again"}}})
		if err != nil {
			t.Fatal(err)
		}
		return log.PublishRaw(s.Subjects().Thread(th, events.KindPosted), events.Header{events.HeaderType: {string(events.TypeMessagePosted)}}, data)
	}
	idle := func(claims int64) func() (bool, string) {
		return func() (bool, string) {
			st := r.Stats()
			return st.Held == 0 && st.Claims >= claims, fmt.Sprintf("%+v", st)
		}
	}
	postID("first", "one")
	testkit.WaitFor(t, 10*time.Second, "the first turn", settled(t, s, th))
	raced := postID("raced", "two")
	re1 := rawRepost("raced") // in the same claim, while the entry may still be written
	testkit.WaitFor(t, 10*time.Second, "the raced post's turn", settled(t, s, th))
	testkit.WaitFor(t, 10*time.Second, "an idle release", idle(1))
	data, err := s.LoadSnapshot(context.Background(), th)
	if err != nil || data == nil {
		t.Fatalf("no snapshot: %v", err)
	}
	if n := snapshotIDs(t, data); n != 1 {
		t.Fatalf("the snapshot keeps %d message ids, want 1 (the raced one)", n)
	}
	re2 := rawRepost("raced") // in the next claim, from the snapshot
	postID("after", "three")
	testkit.WaitFor(t, 10*time.Second, "the next claim's turn", settled(t, s, th))
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	v := fold(t, s, th)
	for _, run := range v.Runs {
		if run.PromptSeq == re1 || run.PromptSeq == re2 {
			t.Fatalf("run %s took the repost at %d (the raced post is %d)", run.ID, run.PromptSeq, raced)
		}
	}
	if len(v.Runs) != 3 {
		t.Fatalf("%d runs, want 3: one per message", len(v.Runs))
	}
	auditClean(t, s, th)
}
