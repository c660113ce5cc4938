package natsstore

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// threadIn returns a thread id whose partition of n is p.
func threadIn(t *testing.T, p, n int) string {
	t.Helper()
	for i := range 10_000 {
		if th := fmt.Sprintf("th%d", i); events.Partition(th, n) == p {
			return th
		}
	}
	t.Fatalf("no thread in partition %d of %d", p, n)
	return ""
}

// nats-server's own subject mapping partitions a thread where
// events.Partition does: a poster publishing threads.T.posted through a
// server mapped with {{partition(4,1)}} lands in the stream and on the
// subject that a P=4 store reads.
func TestPartition_serverMapping(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	const n = 4
	s := open(t, srv, func(c *Config) { c.Partitions = n })
	if err := srv.NATS().GlobalAccount().AddMapping("threads.*.*", fmt.Sprintf("threads.{{partition(%d,1)}}.{{wildcard(1)}}.{{wildcard(2)}}", n)); err != nil {
		t.Fatal(err)
	}
	_, js := connect(t, srv)
	for i := range 40 {
		th := fmt.Sprintf("mapped-%d", i)
		ev := &eventspb.Event{Thread: th, Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: "m1", Text: "hi"}}}
		data, h, err := events.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		ack, err := js.PublishMsg(ctxT(t), &nats.Msg{Subject: "threads." + th + ".posted", Header: nats.Header(h), Data: data})
		if err != nil {
			t.Fatalf("publish through the mapping: %v", err)
		}
		want := events.Partition(th, n)
		if ack.Stream != PartitionStream(DefaultStream, want, n) {
			t.Fatalf("%s landed in %s, want partition %d's stream", th, ack.Stream, want)
		}
		envs := load(t, s, th)
		if len(envs) != 1 || envs[0].Subject != s.Subjects().Thread(th, events.KindPosted) || envs[0].Err != nil {
			t.Fatalf("%s through the mapping, read by the store: %+v", th, envs)
		}
	}
}

// Two threads in different partitions land in different streams, each
// numbered from 1, and their fenced writes name their partition's literal
// claim subject.
func TestPartition_threadsInTheirStreams(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	const n = 4
	s := open(t, srv, func(c *Config) { c.Partitions = n })
	if got := s.StreamNames(); !slices.Equal(got, []string{"ARTIFACTR-p0", "ARTIFACTR-p1", "ARTIFACTR-p2", "ARTIFACTR-p3"}) {
		t.Fatalf("streams %v", got)
	}
	_, js := connect(t, srv)
	for _, p := range []int{1, 3} {
		th := threadIn(t, p, n)
		seq := post(t, s, th, "m1")
		c := claim(t, s, th, "h-"+th)
		ack, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", seq, "echo"), events.Fenced(c))
		if err != nil {
			t.Fatal(err)
		}
		stream := PartitionStream(DefaultStream, p, n)
		if seq != 1 {
			t.Errorf("%s's post is seq %d of its stream %s, want 1: each partition numbers its own", th, seq, stream)
		}
		st, err := js.Stream(ctxT(t), stream)
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.GetMsg(ctxT(t), ack.Seq)
		if err != nil {
			t.Fatalf("run_started %d not in %s: %v", ack.Seq, stream, err)
		}
		claimSubj := fmt.Sprintf("threads.%d.%s.claim", p, th)
		if m.Subject != fmt.Sprintf("threads.%d.%s.run", p, th) || m.Header.Get(jetstream.ExpectedLastSubjSeqSubjHeader) != claimSubj ||
			m.Header.Get(jetstream.ExpectedLastSubjSeqHeader) != fmt.Sprint(c.Seq) {
			t.Fatalf("run_started on %s with fence %q on %q, want on partition %d's run subject, fenced by %d on %s",
				m.Subject, m.Header.Get(jetstream.ExpectedLastSubjSeqHeader), m.Header.Get(jetstream.ExpectedLastSubjSeqSubjHeader), p, c.Seq, claimSubj)
		}
		if info, _ := st.Info(ctxT(t)); info.State.Msgs != 3 {
			t.Fatalf("%s holds %d messages, want %s's 3 only", stream, info.State.Msgs, th)
		}
		// A newer claim fences the old holder in this partition too.
		newerClaim(t, s, c, "thief")
		_, err = s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r2", seq, "echo"), events.Fenced(c))
		if !errors.Is(err, events.ErrThreadBusy) {
			t.Fatalf("fenced append after a takeover in partition %d: %v, want ErrThreadBusy", p, err)
		}
	}
	for _, p := range []int{0, 2} {
		if got := streamMsgs(t, js, PartitionStream(DefaultStream, p, n)); got != 0 {
			t.Errorf("partition %d, with no thread, holds %d messages", p, got)
		}
	}
}

// Whole-log reads name a partition: a tail of one partition sees its
// threads only, and one across partitions is refused clearly.
func TestPartition_tailAndThreads(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	const n = 4
	s := open(t, srv, func(c *Config) { c.Partitions = n })
	a, b := threadIn(t, 0, n), threadIn(t, 2, n)
	_, err := s.Tail(ctxT(t), s.Subjects().All(), 1)
	if !errors.Is(err, events.ErrLayout) {
		t.Fatalf("tail of every partition: %v, want ErrLayout", err)
	}
	if _, err := s.LastStreamSeq(ctxT(t)); !errors.Is(err, events.ErrLayout) {
		t.Fatalf("LastStreamSeq with partitions: %v, want ErrLayout", err)
	}
	post(t, s, a, "m1")
	post(t, s, b, "m1")
	tl, err := s.Tail(ctxT(t), s.Subjects().PartitionAll(2), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Stop()
	env, err := tl.Next(ctxT(t))
	if err != nil || env.Thread != b || env.Seq != 1 {
		t.Fatalf("partition 2's tail: %+v %v, want %s at 1", env, err, b)
	}
	threads, err := s.Threads(ctxT(t))
	slices.Sort(threads)
	if want := []string{a, b}; err != nil || !slices.Equal(threads, want) {
		t.Fatalf("threads %v %v, want %v", threads, err, want)
	}
	if last, err := s.LastPartitionSeq(ctxT(t), 2); err != nil || last != 1 {
		t.Fatalf("partition 2's last seq %d %v", last, err)
	}
}

// One work queue takes posts from every partition's consumer.
func TestPartition_workQueue(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	const n = 4
	s := open(t, srv, func(c *Config) { c.Partitions = n })
	q, err := s.WorkQueue(ctxT(t), "")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	want := map[string]bool{}
	for p := range n {
		th := threadIn(t, p, n)
		want[th] = true
		post(t, s, th, "m1")
	}
	for range n {
		th, ack, err := q.Next(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if !want[th] {
			t.Fatalf("work queue gave %s, not a posted thread or twice", th)
		}
		delete(want, th)
		ack()
	}
	_, js := connect(t, srv)
	for p := range n {
		st, err := js.Stream(ctxT(t), PartitionStream(DefaultStream, p, n))
		if err != nil {
			t.Fatal(err)
		}
		c, err := st.Consumer(ctxT(t), DefaultWorkQueue)
		if err != nil {
			t.Fatalf("partition %d has no work queue consumer: %v", p, err)
		}
		if f := c.CachedInfo().Config.FilterSubject; f != fmt.Sprintf("threads.%d.*.posted", p) {
			t.Fatalf("partition %d's work queue filter %q", p, f)
		}
	}
}

// A store opened with another partition count than its deployment's fails
// with an error that names the count, and creates nothing.
func TestPartition_mismatchFails(t *testing.T) {
	for _, tc := range []struct{ made, opened int }{{4, 1}, {4, 8}, {4, 2}, {1, 4}} {
		t.Run(fmt.Sprintf("made%d_opened%d", tc.made, tc.opened), func(t *testing.T) {
			srv := natsembedtest.RunForTest(t)
			open(t, srv, func(c *Config) { c.Partitions = tc.made })
			_, js := connect(t, srv)
			before := streamNames(t, js)
			for _, noCreate := range []bool{false, true} {
				_, err := New(ctxT(t), Config{URL: srv.ClientURL(), Partitions: tc.opened, NoCreate: noCreate})
				if !errors.Is(err, events.ErrLayout) || !strings.Contains(err.Error(), fmt.Sprintf("--partitions %d", tc.made)) {
					t.Fatalf("open with %d partitions (no create %v) on a deployment of %d: %v, want ErrLayout naming %d",
						tc.opened, noCreate, tc.made, err, tc.made)
				}
			}
			if after := streamNames(t, js); !slices.Equal(before, after) {
				t.Fatalf("streams %v after the failed opens, %v before", after, before)
			}
			// The right count opens.
			open(t, srv, func(c *Config) { c.Partitions = tc.made })
		})
	}
}

func streamNames(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	var out []string
	l := js.StreamNames(ctxT(t))
	for n := range l.Name() {
		out = append(out, n)
	}
	if l.Err() != nil {
		t.Fatal(l.Err())
	}
	slices.Sort(out)
	return out
}

// A deployment written by main before partitions (testdata/main-p1) opens
// unchanged with one partition: the same stream, subjects and events, no
// metadata added, and its threads go on. Opening it with four fails.
func TestPartition_mainStreamOpensUnchanged(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "main-p1"))); err != nil {
		t.Fatal(err)
	}
	srv, err := natsembed.Start(natsembed.Config{DataDir: dir, Listen: "127.0.0.1:-1", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	_, js := connect(t, srv)
	st, err := js.Stream(ctxT(t), DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	cfgBefore := st.CachedInfo().Config
	msgsBefore := st.CachedInfo().State.Msgs

	if _, err := New(ctxT(t), Config{URL: srv.ClientURL(), Partitions: 4}); !errors.Is(err, events.ErrLayout) {
		t.Fatalf("open main's deployment with 4 partitions: %v, want ErrLayout", err)
	}
	s := open(t, srv) // Partitions 0: one
	if got := s.StreamNames(); !slices.Equal(got, []string{DefaultStream}) {
		t.Fatalf("streams %v", got)
	}
	envs := load(t, s, "old-a")
	var types []events.Type
	for _, e := range envs {
		if e.Err != nil {
			t.Fatalf("main's event %d: %v", e.Seq, e.Err)
		}
		types = append(types, e.Type)
	}
	want := []events.Type{events.TypeMessagePosted, events.TypeThreadClaimed, events.TypeRunStarted, events.TypeRunCompleted, events.TypeThreadReleased, events.TypeMessagePosted}
	if !slices.Equal(types, want) || envs[2].ExpectSubject != "threads.old-a.claim" {
		t.Fatalf("old-a as read: %v (fence on %q), want %v fenced on threads.old-a.claim", types, envs[2].ExpectSubject, want)
	}
	threads, err := s.Threads(ctxT(t))
	slices.Sort(threads)
	if err != nil || !slices.Equal(threads, []string{"old-a", "old-b", "old-c"}) {
		t.Fatalf("threads %v %v", threads, err)
	}
	// The thread goes on: a new claim consumes main's pending post.
	c, _, err := events.AcquireClaim(ctxT(t), s, "old-a", "new", time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r2", envs[5].Seq, "echo"), events.Fenced(c)); err != nil {
		t.Fatal(err)
	}
	if ack, err := s.Post(ctxT(t), "old-b", &eventspb.MessagePosted{MessageId: "m1", Author: "main", Text: "hello from main old-b"}); err != nil || !ack.Duplicate {
		t.Fatalf("repost of main's m1 on old-b: %+v %v, want a duplicate", ack, err)
	}
	info, err := st.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if c := info.Config; c.Name != cfgBefore.Name || !slices.Equal(c.Subjects, []string{"threads.>"}) || len(c.Metadata) != len(cfgBefore.Metadata) {
		t.Fatalf("stream config changed: %+v, was %+v", c, cfgBefore)
	}
	if info.State.Msgs != msgsBefore+2 { // claim, run_started, and no new post
		t.Fatalf("%d messages, want main's %d plus 2", info.State.Msgs, msgsBefore)
	}
	if names := streamNames(t, js); slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, DefaultStream+"-p") }) {
		t.Fatalf("a partition stream was made: %v", names)
	}
}

// On a 3-node cluster with R3 each partition's stream has its own Raft
// group and leader, placed by JetStream independently, and a leader change
// in one partition leaves the fence holding in every partition.
func TestPartition_R3leaders(t *testing.T) {
	const n = 6
	c := natsembedtest.StartCluster(t, 3)
	nc, err := nats.Connect(c.ClientURLs(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	s, err := New(ctxT(t), Config{Conn: nc, Replicas: 3, Partitions: n, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// New spread the leaders of the streams it made: at most ⌈6/3⌉ each.
	leaders := map[string][]int{}
	for p, name := range s.StreamNames() {
		l := c.WaitForStreamLeader(name, 30*time.Second)
		leaders[l.Name()] = append(leaders[l.Name()], p)
	}
	t.Logf("partition leaders by node: %v", leaders)
	for node, ps := range leaders {
		if len(ps) > 2 {
			t.Errorf("%s leads partitions %v, more than 2 of 6 on 3 nodes", node, ps)
		}
	}
	// Spreading again moves nothing.
	again, err := s.SpreadLeaders(ctxT(t))
	if err != nil || !maps.EqualFunc(again, leaders, slices.Equal) {
		t.Errorf("spread again: %v %v, was %v", again, err, leaders)
	}
	claims := make([]events.Claim, n)
	threads := make([]string, n)
	for p := range n {
		threads[p] = threadIn(t, p, n)
		claims[p] = claim(t, s, threads[p], "A")
	}
	// Partition 0's leader steps down; every partition's holder still
	// writes, and a stale claim is still fenced.
	stream0 := s.StreamNames()[0]
	old := c.StreamLeader(stream0)
	if err := natsembedtest.StepDownStream(ctxT(t), nc, stream0); err != nil {
		t.Fatal(err)
	}
	c.WaitForStreamLeader(stream0, 30*time.Second)
	if l := c.StreamLeader(stream0); l == old {
		t.Logf("partition 0's leader is %s again", l.Name())
	}
	for p, th := range threads {
		seq := post(t, s, th, "m1")
		if _, err := s.Append(ctxT(t), events.NewRunStarted(claims[p], time.Now(), "r1", seq, "echo"), events.Fenced(claims[p])); err != nil {
			t.Fatalf("partition %d: fenced append: %v", p, err)
		}
		newerClaim(t, s, claims[p], "B")
		if _, err := s.Append(ctxT(t), events.NewRunAbandoned(claims[p], time.Now(), "r1", claims[p].Seq, "x"), events.Fenced(claims[p])); !errors.Is(err, events.ErrThreadBusy) {
			t.Fatalf("partition %d: stale fenced append: %v, want ErrThreadBusy", p, err)
		}
	}
}

func TestPartition_reads(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	eventstest.RunPartitionReads(t, open(t, srv, func(c *Config) { c.Partitions = 4 }))
}
