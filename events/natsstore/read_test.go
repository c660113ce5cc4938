package natsstore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
)

// Raw garbage on the run subject: Load still works, marks it, and loads
// what follows.
func TestStore_Load_garbage(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	_, js := connect(t, srv)
	post(t, s, "T", "m1")
	if _, err := js.Publish(ctxT(t), "threads.T.run", []byte{0xff, 0x00, 0x13, 0x37}); err != nil {
		t.Fatal(err)
	}
	m2 := post(t, s, "T", "m2")
	envs := load(t, s, "T")
	if len(envs) != 3 || envs[1].Err == nil || envs[2].Seq != m2 || envs[2].Err != nil {
		t.Fatalf("load with garbage: %+v", envs)
	}
	t.Logf("garbage: %v", envs[1].Err)
}

// Load across more than one pull batch, and from the middle.
func TestStore_Load_manyAndFrom(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	post(t, s, "other", "x")
	n := 2*loadBatch + 17
	seqs := make([]uint64, n)
	for i := range n {
		seqs[i] = post(t, s, "T", fmt.Sprintf("m%d", i))
	}
	envs := load(t, s, "T")
	if len(envs) != n {
		t.Fatalf("loaded %d, want %d", len(envs), n)
	}
	for i, e := range envs {
		if e.Seq != seqs[i] || e.Err != nil || e.Thread != "T" {
			t.Fatalf("event %d: %+v, want seq %d", i, e, seqs[i])
		}
	}
	mid, err := s.Load(ctxT(t), "T", seqs[n/2])
	if err != nil || len(mid) != n-n/2 || mid[0].Seq != seqs[n/2] {
		t.Fatalf("load from %d: %d events, err %v", seqs[n/2], len(mid), err)
	}
	last, err := s.Load(ctxT(t), "T", seqs[n-1])
	if err != nil || len(last) != 1 {
		t.Fatalf("load of the last: %d events, err %v", len(last), err)
	}
	none, err := s.Load(ctxT(t), "T", seqs[n-1]+1)
	if err != nil || len(none) != 0 {
		t.Fatalf("load past the end: %d events, err %v", len(none), err)
	}
	empty, err := s.Load(ctxT(t), "nothing-here", 1)
	if err != nil || len(empty) != 0 {
		t.Fatalf("load of an empty thread: %d events, err %v", len(empty), err)
	}
}

func TestStore_Tail_newAndStop(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	post(t, s, "T", "old")
	tl, err := s.Tail(ctxT(t), "threads.*.posted", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := post(t, s, "U", "new")
	env, err := tl.Next(ctxT(t))
	if err != nil || env.Seq != want || env.Thread != "U" {
		t.Fatalf("tail from new: %+v %v, want seq %d", env, err, want)
	}
	tl.Stop()
	tl.Stop()
	if _, err := tl.Next(ctxT(t)); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("Next after Stop: %v, want ErrClosed", err)
	}
}

// A tail of new events whose consumer is lost before it delivered anything
// goes on with new events, not the stream from its first: the ordered
// consumer's replacement starts where the tail asked to.
func TestStore_Tail_newSurvivesLostConsumer(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	for i := range 5 {
		post(t, s, "T", fmt.Sprintf("old%d", i))
	}
	tl, err := s.Tail(ctxT(t), "threads.>", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Stop()
	_, js := connect(t, srv)
	st, err := js.Stream(ctxT(t), DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	deleted := 0
	for name := range st.ConsumerNames(ctxT(t)).Name() {
		if err := st.DeleteConsumer(ctxT(t), name); err != nil {
			t.Fatal(err)
		}
		deleted++
	}
	if deleted != 1 {
		t.Fatalf("deleted %d consumers, want the tail's one", deleted)
	}
	want := post(t, s, "U", "new")
	env, err := tl.Next(ctxT(t))
	if err != nil || env.Seq != want || env.Thread != "U" {
		t.Fatalf("after its consumer was lost the tail of new events gave seq %d (thread %q, err %v), want %d", env.Seq, env.Thread, err, want)
	}
}

func TestStore_Threads_listsPosted(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	for _, th := range []string{"a", "b", "c"} {
		post(t, s, th, "m")
	}
	got, err := s.Threads(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if strings.Join(got, ",") != "a,b,c" {
		t.Fatalf("threads %v", got)
	}
}

// A tail survives a server restart: the connection reconnects and the
// ordered consumer recreates itself after the last event it returned.
func TestStore_Tail_survivesRestart(t *testing.T) {
	cfg, srv := restartable(t)
	var err error
	s := open(t, srv)
	first := post(t, s, "T", "m1")
	tl, err := s.Tail(ctxT(t), "threads.T.>", first)
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Stop()
	if env, err := tl.Next(ctxT(t)); err != nil || env.Seq != first {
		t.Fatalf("before restart: %+v %v", env, err)
	}
	srv.Shutdown()
	if srv, err = natsembed.Start(cfg); err != nil {
		t.Fatal(err)
	}
	var second uint64
	testkit.CheckFor(t, 20*time.Second, func() error {
		ack, err := s.Post(ctxT(t), "T", &eventspb.MessagePosted{MessageId: "m2", Text: "after restart"})
		second = ack.Seq
		return err
	})
	env, err := tl.Next(ctxT(t))
	if err != nil || env.Seq != second {
		t.Fatalf("after restart: %+v %v, want seq %d", env, err, second)
	}
}
