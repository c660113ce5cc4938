package eventstest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
)

// ReadModelStore is what the read-model contract suite needs of a store:
// the read models' port, and posts to write the log it reads.
type ReadModelStore interface {
	events.ReadModelStore
	events.Poster
}

// ReadModelEnv is a store on a fresh, empty log for one case of the
// read-model suite.
type ReadModelEnv struct {
	Store ReadModelStore
	// Advance, if set, moves forward the clock by which the store's durable
	// consumers time their ack waits. A store whose server clock cannot be
	// moved (natsstore) leaves it nil; the redelivery case then waits for
	// the ack wait in Fetch, which waits on the store (it never sleeps).
	Advance func(d time.Duration)
}

// ReadModelHarness opens stores for [RunReadModel].
type ReadModelHarness struct {
	// Open returns a store on a fresh, empty log that only t uses: the
	// suite checks stream sequences and durable positions exactly.
	Open func(t *testing.T) ReadModelEnv
}

// RunReadModel runs the contract of [events.ReadModelStore] (its
// [events.LogReader], durable consumers and key-value buckets) against the
// stores h opens.
func RunReadModel(t *testing.T, h ReadModelHarness) {
	tests := []struct {
		name string
		fn   func(*testing.T, ReadModelEnv)
	}{
		{"LogReader", testLogReader},
		{"ReplayStopsOnError", testReplayStopsOnError},
		{"DurableOrderAndPosition", testDurableOrderAndPosition},
		{"DurableAckAll", testDurableAckAll},
		{"DurableUnsafeConfig", testDurableUnsafeConfig},
		{"DurableRedelivery", testDurableRedelivery},
		{"DurableReset", testDurableReset},
		{"DurableFilter", testDurableFilter},
		{"DurableMaxAckPending", testDurableMaxAckPending},
		{"DurableFetchWaits", testDurableFetchWaits},
		{"DurableStateAndDelete", testDurableStateAndDelete},
		{"BucketOpen", testBucketOpen},
		{"BucketCompareAndSet", testBucketCompareAndSet},
		{"BucketPutMany", testBucketPutMany},
		{"BucketGetMany", testBucketGetMany},
		{"BucketScan", testBucketScan},
		{"BucketPurge", testBucketPurge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h.Open(t)) })
	}
}

// postN posts n messages to thread and returns their sequences.
func postN(t *testing.T, s events.Poster, thread string, n int) []uint64 {
	t.Helper()
	seqs := make([]uint64, n)
	for i := range seqs {
		seqs[i] = post(t, s, thread, fmt.Sprintf("m%d", i), fmt.Sprintf("text %d", i))
	}
	return seqs
}

func openDurable(t *testing.T, s events.ReadModelStore, cfg events.DurableConfig) events.DurableConsumer {
	t.Helper()
	d, err := s.OpenDurable(ctxT(t), cfg)
	if err != nil {
		t.Fatalf("open durable %s: %v", cfg.Name, err)
	}
	return d
}

// idle is how long a fetch that expects nothing waits: long enough for a
// server to answer, short enough to keep the suite quick. No assertion
// rests on it: an event that is there is returned by a fetch with no wait.
const idle = 50 * time.Millisecond

func fetch(t *testing.T, d events.DurableConsumer, max int, wait time.Duration) []events.Delivery {
	t.Helper()
	ds, err := d.Fetch(ctxT(t), max, wait)
	if err != nil {
		t.Fatalf("fetch %d: %v", max, err)
	}
	return ds
}

// fetchN fetches until it has n deliveries, failing when a fresh test
// context ends first.
func fetchN(t *testing.T, d events.DurableConsumer, n int) []events.Delivery {
	t.Helper()
	return fetchWithin(t, ctxT(t), d, n)
}

// fetchWithin fetches until it has n deliveries, failing when ctx ends
// first.
func fetchWithin(t *testing.T, ctx context.Context, d events.DurableConsumer, n int) []events.Delivery {
	t.Helper()
	var out []events.Delivery
	for len(out) < n {
		ds, err := d.Fetch(ctx, n-len(out), time.Second)
		if err != nil {
			t.Fatalf("fetch %d of %d: %v", len(out)+1, n, err)
		}
		out = append(out, ds...)
	}
	return out
}

func deliveredSeqs(ds []events.Delivery) []uint64 {
	out := make([]uint64, len(ds))
	for i, d := range ds {
		out[i] = d.Env.Seq
	}
	return out
}

func state(t *testing.T, s events.ReadModelStore, name string) events.DurableInfo {
	t.Helper()
	info, err := s.DurableState(ctxT(t), name)
	if err != nil {
		t.Fatalf("state of %s: %v", name, err)
	}
	return info
}

func ack(t *testing.T, d events.DurableConsumer, dl events.Delivery) {
	t.Helper()
	if err := d.Ack(ctxT(t), dl); err != nil {
		t.Fatalf("ack %d: %v", dl.Env.Seq, err)
	}
}

// LastStreamSeq, NextSeq, Load and Replay read the log across threads,
// up to its last sequence, and on a filter.
func testLogReader(t *testing.T, env ReadModelEnv) {
	s := env.Store
	if n, err := s.LastStreamSeq(ctxT(t)); err != nil || n != 0 {
		t.Fatalf("empty log: last %d, %v", n, err)
	}
	if _, ok, err := s.NextSeq(ctxT(t), 1); err != nil || ok {
		t.Fatalf("empty log: next found %v, %v", ok, err)
	}
	a, b := NewThread(t), NewThread(t)
	sa := postN(t, s, a, 3)
	sb := postN(t, s, b, 2)
	if n, err := s.LastStreamSeq(ctxT(t)); err != nil || n != sb[1] {
		t.Fatalf("last %d, %v; want %d", n, err, sb[1])
	}
	if seq, ok, err := s.NextSeq(ctxT(t), sa[2]); err != nil || !ok || seq != sa[2] {
		t.Fatalf("next from %d: %d %v %v", sa[2], seq, ok, err)
	}
	if seq, ok, err := s.NextSeq(ctxT(t), 0); err != nil || !ok || seq != sa[0] {
		t.Fatalf("next from 0: %d %v %v; want %d", seq, ok, err, sa[0])
	}
	if _, ok, err := s.NextSeq(ctxT(t), sb[1]+1); err != nil || ok {
		t.Fatalf("next after the last: found %v, %v", ok, err)
	}
	if got := seqs(load(t, s, b)); !slices.Equal(got, sb) {
		t.Fatalf("load %s: %v, want %v", b, got, sb)
	}
	replay := func(filter string, from uint64) ([]uint64, uint64) {
		t.Helper()
		var got []uint64
		last, err := s.Replay(ctxT(t), filter, from, func(e events.Envelope) error {
			if e.Err != nil {
				return e.Err
			}
			got = append(got, e.Seq)
			return nil
		})
		if err != nil {
			t.Fatalf("replay %s from %d: %v", filter, from, err)
		}
		return got, last
	}
	subj := s.Subjects()
	if got, last := replay(subj.All(), sa[1]); !slices.Equal(got, []uint64{sa[1], sa[2], sb[0], sb[1]}) || last != sb[1] {
		t.Fatalf("replay all from %d: %v up to %d", sa[1], got, last)
	}
	if got, last := replay(subj.ThreadAll(b), 0); !slices.Equal(got, sb) || last != sb[1] {
		t.Fatalf("replay %s: %v up to %d", b, got, last)
	}
	if got, last := replay(subj.All(), sb[1]+1); len(got) != 0 || last != sb[1] {
		t.Fatalf("replay past the end: %v up to %d", got, last)
	}
}

// An error from Replay's callback stops it and is returned.
func testReplayStopsOnError(t *testing.T, env ReadModelEnv) {
	s := env.Store
	postN(t, s, NewThread(t), 5)
	stop := errors.New("stop here")
	calls := 0
	_, err := s.Replay(ctxT(t), s.Subjects().All(), 1, func(events.Envelope) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 2 {
		t.Fatalf("replay after the callback's error: %d calls, %v", calls, err)
	}
}

// A durable delivers in stream order from the first event, and keeps its
// position across reopens.
func testDurableOrderAndPosition(t *testing.T, env ReadModelEnv) {
	s := env.Store
	want := postN(t, s, NewThread(t), 5)
	d := openDurable(t, s, events.DurableConfig{Name: "rm"})
	ds := fetchN(t, d, 3)
	if got := deliveredSeqs(ds); !slices.Equal(got, want[:3]) {
		t.Fatalf("first fetch: %v, want %v", got, want[:3])
	}
	for _, dl := range ds {
		if dl.Delivered != 1 {
			t.Fatalf("first delivery of %d counted %d", dl.Env.Seq, dl.Delivered)
		}
		if dl.Env.Err != nil || dl.Env.Event == nil {
			t.Fatalf("delivery %d not decoded: %v", dl.Env.Seq, dl.Env.Err)
		}
	}
	ack(t, d, ds[2])
	info := state(t, s, "rm")
	if info.Name != "rm" || info.AckFloor != want[2] || info.Delivered != want[2] || info.NumPending != 2 || info.NumAckPending != 0 {
		t.Fatalf("state after acking 3 of 5: %+v", info)
	}
	// Another reader of the same durable resumes where it is.
	d2 := openDurable(t, s, events.DurableConfig{Name: "rm"})
	if got := deliveredSeqs(fetchN(t, d2, 2)); !slices.Equal(got, want[3:]) {
		t.Fatalf("after reopen: %v, want %v", got, want[3:])
	}
	if ds := fetch(t, d2, 10, idle); len(ds) != 0 {
		t.Fatalf("fetch past the end: %v", deliveredSeqs(ds))
	}
}

// An ack acknowledges the delivery and every one before it.
func testDurableAckAll(t *testing.T, env ReadModelEnv) {
	s := env.Store
	want := postN(t, s, NewThread(t), 4)
	d := openDurable(t, s, events.DurableConfig{Name: "rm"})
	ds := fetchN(t, d, 4)
	ack(t, d, ds[1])
	info := state(t, s, "rm")
	if info.AckFloor != want[1] || info.NumAckPending != 2 || info.Delivered != want[3] || info.NumPending != 0 {
		t.Fatalf("state after acking the second of 4: %+v", info)
	}
	ack(t, d, ds[3])
	if info := state(t, s, "rm"); info.AckFloor != want[3] || info.NumAckPending != 0 {
		t.Fatalf("state after acking the last: %+v", info)
	}
}

// A durable of the same name with another filter is refused; the default
// filter is every event, and AckWait and MaxAckPending may differ.
func testDurableUnsafeConfig(t *testing.T, env ReadModelEnv) {
	s := env.Store
	subj := s.Subjects()
	openDurable(t, s, events.DurableConfig{Name: "rm"})
	openDurable(t, s, events.DurableConfig{Name: "rm", Filter: subj.All(), AckWait: time.Minute, MaxAckPending: 7})
	_, err := s.OpenDurable(ctxT(t), events.DurableConfig{Name: "rm", Filter: subj.AllOf(events.KindPosted)})
	wantErr(t, err, events.ErrUnsafeConfig, "reopen with another filter")
	openDurable(t, s, events.DurableConfig{Name: "posted", Filter: subj.AllOf(events.KindPosted)})
	_, err = s.OpenDurable(ctxT(t), events.DurableConfig{Name: "posted"})
	wantErr(t, err, events.ErrUnsafeConfig, "reopen with the default filter")
	if _, err := s.OpenDurable(ctxT(t), events.DurableConfig{Name: "bad name"}); err == nil {
		t.Fatal("a durable named \"bad name\" was opened")
	}
}

// A delivery not acked within AckWait comes again, counted, and newer
// events are delivered too.
func testDurableRedelivery(t *testing.T, env ReadModelEnv) {
	s := env.Store
	th := NewThread(t)
	want := postN(t, s, th, 2)
	const ackWait = 200 * time.Millisecond
	d := openDurable(t, s, events.DurableConfig{Name: "rm", AckWait: ackWait})
	ds := fetchN(t, d, 2)
	ack(t, d, ds[0])
	newer := post(t, s, th, "newer", "newer")
	if env.Advance != nil {
		env.Advance(ackWait)
	}
	var again *events.Delivery
	sawNewer := false
	ctx := ctxT(t) // bounds the whole wait for the redelivery
	for again == nil || !sawNewer {
		for _, dl := range fetchWithin(t, ctx, d, 1) {
			switch dl.Env.Seq {
			case want[1]:
				again = &dl
			case newer:
				sawNewer = true
			case want[0]:
				t.Fatalf("acked delivery %d came again", dl.Env.Seq)
			}
		}
	}
	if again.Delivered < 2 {
		t.Fatalf("redelivery of %d counted %d deliveries", again.Env.Seq, again.Delivered)
	}
	if info := state(t, s, "rm"); info.NumPending != 0 || info.Delivered != newer {
		t.Fatalf("state after the redelivery: %+v", info)
	}
}

// Reset makes deliveries start again from a sequence, in order.
func testDurableReset(t *testing.T, env ReadModelEnv) {
	s := env.Store
	want := postN(t, s, NewThread(t), 5)
	d := openDurable(t, s, events.DurableConfig{Name: "rm"})
	fetchN(t, d, 5)
	if err := d.Reset(ctxT(t), want[1]); err != nil {
		t.Fatal(err)
	}
	ds := fetchN(t, d, 4)
	if got := deliveredSeqs(ds); !slices.Equal(got, want[1:]) {
		t.Fatalf("after reset to %d: %v", want[1], got)
	}
	ack(t, d, ds[3])
	if info := state(t, s, "rm"); info.AckFloor != want[4] || info.NumAckPending != 0 || info.NumPending != 0 {
		t.Fatalf("state after acking every redelivery: %+v", info)
	}
	if ds := fetch(t, d, 10, idle); len(ds) != 0 {
		t.Fatalf("fetch after acking all: %v", deliveredSeqs(ds))
	}
}

// A durable on a filter delivers, and counts as pending, only the events
// on it.
func testDurableFilter(t *testing.T, env ReadModelEnv) {
	s := env.Store
	a, b := NewThread(t), NewThread(t)
	var want []uint64
	for i := range 3 {
		want = append(want, post(t, s, a, fmt.Sprint("a", i), "a"))
		post(t, s, b, fmt.Sprint("b", i), "b")
	}
	d := openDurable(t, s, events.DurableConfig{Name: "rm", Filter: s.Subjects().ThreadAll(a)})
	if info := state(t, s, "rm"); info.NumPending != 3 {
		t.Fatalf("pending on %s before any fetch: %+v", a, info)
	}
	ds := fetchN(t, d, 3)
	if got := deliveredSeqs(ds); !slices.Equal(got, want) {
		t.Fatalf("filtered deliveries: %v, want %v", got, want)
	}
	if ds := fetch(t, d, 10, idle); len(ds) != 0 {
		t.Fatalf("fetch past the filter's events: %v", deliveredSeqs(ds))
	}
	if info := state(t, s, "rm"); info.NumPending != 0 || info.NumAckPending != 3 {
		t.Fatalf("state after fetching all: %+v", info)
	}
}

// No more than MaxAckPending deliveries await an ack at once.
func testDurableMaxAckPending(t *testing.T, env ReadModelEnv) {
	s := env.Store
	want := postN(t, s, NewThread(t), 4)
	d := openDurable(t, s, events.DurableConfig{Name: "rm", MaxAckPending: 2})
	ds := fetch(t, d, 10, time.Second)
	if got := deliveredSeqs(ds); !slices.Equal(got, want[:2]) {
		t.Fatalf("fetch with 2 acks pending at most: %v", got)
	}
	if more := fetch(t, d, 10, idle); len(more) != 0 {
		t.Fatalf("fetch with 2 acks pending: %v", deliveredSeqs(more))
	}
	ack(t, d, ds[1])
	if got := deliveredSeqs(fetchN(t, d, 2)); !slices.Equal(got, want[2:]) {
		t.Fatalf("fetch after the ack: %v", got)
	}
}

// A Fetch waits for an event that comes while it waits.
func testDurableFetchWaits(t *testing.T, env ReadModelEnv) {
	s := env.Store
	d := openDurable(t, s, events.DurableConfig{Name: "rm"})
	type result struct {
		ds  []events.Delivery
		err error
	}
	done := make(chan result, 1)
	ctx := ctxT(t)
	go func() {
		ds, err := d.Fetch(ctx, 10, 20*time.Second)
		done <- result{ds, err}
	}()
	seq := post(t, s, NewThread(t), "m", "m")
	r := <-done
	if r.err != nil || len(r.ds) != 1 || r.ds[0].Env.Seq != seq {
		t.Fatalf("waiting fetch: %v, %v; want [%d]", deliveredSeqs(r.ds), r.err, seq)
	}
}

// DurableState of a missing durable is ErrNotFound; deleting one twice is
// no error, and a durable made again after a delete starts from the first
// event.
func testDurableStateAndDelete(t *testing.T, env ReadModelEnv) {
	s := env.Store
	_, err := s.DurableState(ctxT(t), "rm")
	wantErr(t, err, events.ErrNotFound, "state of a missing durable")
	if err := s.DeleteDurable(ctxT(t), "rm"); err != nil {
		t.Fatalf("delete of a missing durable: %v", err)
	}
	want := postN(t, s, NewThread(t), 2)
	d := openDurable(t, s, events.DurableConfig{Name: "rm"})
	ack(t, d, fetchN(t, d, 2)[1])
	if info := state(t, s, "rm"); info.AckFloor != want[1] {
		t.Fatalf("state: %+v", info)
	}
	for range 2 {
		if err := s.DeleteDurable(ctxT(t), "rm"); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	_, err = s.DurableState(ctxT(t), "rm")
	wantErr(t, err, events.ErrNotFound, "state of a deleted durable")
	d = openDurable(t, s, events.DurableConfig{Name: "rm"})
	if got := deliveredSeqs(fetchN(t, d, 2)); !slices.Equal(got, want) {
		t.Fatalf("durable made again: %v, want %v", got, want)
	}
}
