package natsstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// fencedItems builds k fenced steering_given items under c, with msg ids
// <thread>:<prefix>-<i>.
func fencedItems(c events.Claim, k int, prefix string) []BatchItem {
	items := make([]BatchItem, k)
	for i := range items {
		items[i] = BatchItem{
			Event: events.NewSteeringGiven(c, time.Now(), "r1", uint64(i+1)),
			Check: events.Fenced(c),
			MsgID: fmt.Sprintf("%s:%s-%d", c.Thread, prefix, i),
		}
	}
	return items
}

// A fenced batch lands whole, at consecutive sequences in order, each event
// with its own check headers and msg id stored.
func TestStore_AppendBatch_fencedLands(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	m := post(t, s, "T", "m1")
	c := claim(t, s, "T", "A")
	const k = 5
	items := append([]BatchItem{{Event: events.NewRunStarted(c, time.Now(), "r1", m, "echo"), Check: events.Fenced(c)}},
		fencedItems(c, k-1, "b")...)
	acks, err := s.AppendBatch(ctxT(t), items)
	if err != nil {
		t.Fatal(err)
	}
	if len(acks) != k {
		t.Fatalf("%d acks, want %d", len(acks), k)
	}
	for i := 1; i < k; i++ {
		if acks[i].Seq != acks[i-1].Seq+1 || acks[i].Duplicate {
			t.Fatalf("acks not consecutive: %+v", acks)
		}
	}
	if got := lastSeq(t, s, "T", events.KindRun); got != acks[k-1].Seq {
		t.Fatalf("run subject last seq %d, want %d", got, acks[k-1].Seq)
	}
	byseq := map[uint64]events.Envelope{}
	for _, e := range load(t, s, "T") {
		if e.Err != nil {
			t.Fatalf("event %d: %v", e.Seq, e.Err)
		}
		byseq[e.Seq] = e
	}
	claimSubj := s.subj.Thread("T", events.KindClaim)
	for i, a := range acks {
		e, ok := byseq[a.Seq]
		switch {
		case !ok:
			t.Fatalf("item %d: no event at seq %d", i, a.Seq)
		case e.Type != events.TypeOf(items[i].Event):
			t.Fatalf("item %d: stored %s, want %s", i, e.Type, events.TypeOf(items[i].Event))
		case e.ExpectSeq != c.Seq || e.ExpectSubject != claimSubj:
			t.Fatalf("item %d: stored check %d on %q, want %d on %q", i, e.ExpectSeq, e.ExpectSubject, c.Seq, claimSubj)
		case items[i].MsgID != "" && e.MsgID != items[i].MsgID:
			t.Fatalf("item %d: stored msg id %q, want %q", i, e.MsgID, items[i].MsgID)
		case e.MsgID == "":
			t.Fatalf("item %d: no msg id stored", i)
		}
	}
}

// A batch whose fence is stale writes nothing and returns ErrThreadBusy.
func TestStore_AppendBatch_staleFenceWritesNothing(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	_, js := connect(t, srv)
	m := post(t, s, "T", "m1")
	c := claim(t, s, "T", "A")
	newerClaim(t, s, c, "B")
	msgs := streamMsgs(t, js, s.cfg.Stream)
	items := append([]BatchItem{{Event: events.NewRunStarted(c, time.Now(), "r1", m, "echo"), Check: events.Fenced(c)}},
		fencedItems(c, 7, "b")...)
	_, err := s.AppendBatch(ctxT(t), items)
	if !errors.Is(err, events.ErrThreadBusy) || errors.Is(err, events.ErrConflict) || apiCode(err) != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Fatalf("stale fenced batch: %v, want ErrThreadBusy wrapping 10071", err)
	}
	if got := lastSeq(t, s, "T", events.KindRun); got != 0 {
		t.Fatalf("refused batch wrote run seq %d", got)
	}
	if got := streamMsgs(t, js, s.cfg.Stream); got != msgs {
		t.Fatalf("refused batch changed the stream: %d -> %d messages", msgs, got)
	}
}

// A batch mixing a compare-and-set and fences: a stale compare-and-set is a
// conflict, a stale fence is busy; either way nothing is written.
func TestStore_AppendBatch_mixedRefusals(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	m := post(t, s, "T", "m1")
	c := claim(t, s, "T", "A")
	rs, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "echo"), events.Fenced(c))
	if err != nil {
		t.Fatal(err)
	}
	// run_completed (CAS on run), then the next run's start and steering
	// (fenced): a valid shape.
	batch := func(casSeq uint64) []BatchItem {
		return append([]BatchItem{
			{Event: events.NewRunCompleted(c, time.Now(), "r1", "done"), Check: events.ExpectLast(casSeq)},
			{Event: events.NewRunStarted(c, time.Now(), "r2", m, "echo"), Check: events.Fenced(c)},
		}, fencedItems(c, 2, fmt.Sprint("cas", casSeq))...)
	}
	_, err = s.AppendBatch(ctxT(t), batch(rs.Seq-1))
	if !errors.Is(err, events.ErrConflict) || errors.Is(err, events.ErrThreadBusy) {
		t.Fatalf("stale compare-and-set in batch: %v, want ErrConflict", err)
	}
	if got := lastSeq(t, s, "T", events.KindRun); got != rs.Seq {
		t.Fatalf("conflicting batch moved the run subject %d -> %d", rs.Seq, got)
	}
	newerClaim(t, s, c, "B")
	_, err = s.AppendBatch(ctxT(t), batch(rs.Seq))
	if !errors.Is(err, events.ErrThreadBusy) || errors.Is(err, events.ErrConflict) {
		t.Fatalf("stale fence in mixed batch: %v, want ErrThreadBusy", err)
	}
	if got := lastSeq(t, s, "T", events.KindRun); got != rs.Seq {
		t.Fatalf("fenced-out batch moved the run subject %d -> %d", rs.Seq, got)
	}
}

// The valid mixed shape lands; a resend with the same msg ids is refused
// whole (10201) rather than stored twice.
func TestStore_AppendBatch_casThenFencedLands(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	_, js := connect(t, srv)
	m := post(t, s, "T", "m1")
	c := claim(t, s, "T", "A")
	rs, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "echo"), events.Fenced(c))
	if err != nil {
		t.Fatal(err)
	}
	items := []BatchItem{
		{Event: events.NewRunCompleted(c, time.Now(), "r1", "done"), Check: events.ExpectLast(rs.Seq), MsgID: "T:done-r1"},
		{Event: events.NewRunStarted(c, time.Now(), "r2", m, "echo"), Check: events.Fenced(c), MsgID: "T:start-r2"},
	}
	acks, err := s.AppendBatch(ctxT(t), items)
	if err != nil {
		t.Fatal(err)
	}
	if acks[0].Seq != rs.Seq+1 || acks[1].Seq != rs.Seq+2 {
		t.Fatalf("acks %+v, want %d, %d", acks, rs.Seq+1, rs.Seq+2)
	}
	msgs := streamMsgs(t, js, s.cfg.Stream)
	_, err = s.AppendBatch(ctxT(t), items)
	if err == nil || apiCode(err) != errCodeBatchDupMsgID {
		t.Fatalf("resent batch: %v, want 10201", err)
	}
	if got := streamMsgs(t, js, s.cfg.Stream); got != msgs {
		t.Fatalf("resent batch was stored again: %d -> %d messages", msgs, got)
	}
}

// Batches the server would refuse, or that break the append rules, are
// refused before anything is sent.
func TestStore_AppendBatch_invalidRefusedBeforeSending(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	_, js := connect(t, srv)
	m := post(t, s, "T", "m1")
	c := claim(t, s, "T", "A")
	c2 := claim(t, s, "U", "A")
	now := time.Now()
	started := func(c events.Claim, run string) BatchItem {
		return BatchItem{Event: events.NewRunStarted(c, now, run, m, "echo"), Check: events.Fenced(c)}
	}
	tooMany := make([]BatchItem, MaxBatch+1)
	for i := range tooMany {
		tooMany[i] = started(c, fmt.Sprint("r", i))
	}
	cases := map[string]struct {
		items []BatchItem
		why   string
	}{
		"empty":          {nil, "empty"},
		"too many":       {tooMany, "over the limit"},
		"two threads":    {[]BatchItem{started(c, "r1"), started(c2, "r2")}, "one thread"},
		"dup msg id":     {[]BatchItem{{Event: started(c, "r1").Event, Check: events.Fenced(c), MsgID: "T:x"}, {Event: started(c, "r2").Event, Check: events.Fenced(c), MsgID: "T:x"}}, "share msg id"},
		"unfenced start": {[]BatchItem{{Event: started(c, "r1").Event, Check: events.ExpectLast(0)}}, "must be fenced"},
		"post":           {[]BatchItem{{Event: events.NewRunOutput(c, now, "r1", "x"), Check: events.Check{}}}, "compare-and-set"},
		"cas after write": {[]BatchItem{started(c, "r1"),
			{Event: events.NewRunOutput(c, now, "r1", "x"), Check: events.ExpectLast(0)}}, "writes first"},
		"fence after claim write": {[]BatchItem{
			{Event: &eventspb.Event{Thread: "T", ClaimSeq: c.Seq, Holder: "A", Body: &eventspb.Event_ThreadReleased{ThreadReleased: &eventspb.ThreadReleased{Holder: "A"}}}, Check: events.ExpectLast(c.Seq)},
			started(c, "r1")}, "writes first"},
		"two fences": {[]BatchItem{started(c, "r1"),
			{Event: events.NewSteeringGiven(events.Claim{Thread: "T", Holder: "A", Seq: c.Seq + 100}, now, "r1", m), Check: events.Fenced(events.Claim{Seq: c.Seq + 100})}}, "cannot hold"},
	}
	before := streamMsgs(t, js, s.cfg.Stream)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := s.AppendBatch(ctxT(t), tc.items)
			if !errors.Is(err, events.ErrInvalidEvent) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("got %v, want ErrInvalidEvent saying %q", err, tc.why)
			}
		})
	}
	if got := streamMsgs(t, js, s.cfg.Stream); got != before {
		t.Fatalf("invalid batches wrote %d messages", got-before)
	}
}
