package natsstore

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// Spec: StartFenced. A fenced append under a claim that is no longer the
// newest is refused by the server, and nothing is written.
func TestStore_Append_fenceRefused(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	m := post(t, s, "T", "m1")
	c := claim(t, s, "T", "A")
	newerClaim(t, s, c, "B")
	before := load(t, s, "T")
	_, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "echo"), events.Fenced(c))
	if !errors.Is(err, events.ErrThreadBusy) || apiCode(err) != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Fatalf("fenced append under an old claim: %v, want ErrThreadBusy wrapping 10071", err)
	}
	if got := lastSeq(t, s, "T", events.KindRun); got != 0 {
		t.Fatalf("refused append wrote run seq %d", got)
	}
	if after := load(t, s, "T"); len(after) != len(before) {
		t.Fatalf("refused append changed the thread: %d -> %d events", len(before), len(after))
	}
}

func TestStore_Append_casConflict(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	m := post(t, s, "T", "m1")
	c := claim(t, s, "T", "A")
	ack, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "echo"), events.Fenced(c))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctxT(t), events.NewRunOutput(c, time.Now(), "r1", "a"), events.ExpectLast(ack.Seq)); err != nil {
		t.Fatal(err)
	}
	before := lastSeq(t, s, "T", events.KindRun)
	_, err = s.Append(ctxT(t), events.NewRunOutput(c, time.Now(), "r1", "b"), events.ExpectLast(ack.Seq))
	if !errors.Is(err, events.ErrConflict) || errors.Is(err, events.ErrThreadBusy) || apiCode(err) != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Fatalf("stale compare-and-set: %v, want ErrConflict wrapping 10071", err)
	}
	if got := lastSeq(t, s, "T", events.KindRun); got != before {
		t.Fatalf("conflict moved the run subject %d -> %d", before, got)
	}
}

// The expected-sequence headers are stored with the events, for the audit.
func TestStore_Append_checkHeadersStored(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	m := post(t, s, "T", "m1")
	c := claim(t, s, "T", "A")
	rs, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "echo"), events.Fenced(c))
	if err != nil {
		t.Fatal(err)
	}
	ro, err := s.Append(ctxT(t), events.NewRunOutput(c, time.Now(), "r1", "x"), events.ExpectLast(rs.Seq))
	if err != nil {
		t.Fatal(err)
	}
	envs := load(t, s, "T")
	byseq := map[uint64]events.Envelope{}
	for _, e := range envs {
		if e.Err != nil {
			t.Fatalf("event %d: %v", e.Seq, e.Err)
		}
		byseq[e.Seq] = e
	}
	if e := byseq[rs.Seq]; e.ExpectSeq != c.Seq || e.ExpectSubject != "threads.T.claim" || !strings.HasPrefix(e.MsgID, "T:") {
		t.Errorf("fenced event: expect %d on %q id %q, want %d on threads.T.claim", e.ExpectSeq, e.ExpectSubject, e.MsgID, c.Seq)
	}
	if e := byseq[ro.Seq]; e.ExpectSeq != rs.Seq || e.ExpectSubject != "" {
		t.Errorf("compare-and-set event: expect %d on %q, want %d on its own subject", e.ExpectSeq, e.ExpectSubject, rs.Seq)
	}
	if e := byseq[m]; e.ExpectSeq != 0 || e.ExpectSubject != "" || e.MsgID != "T:m1" {
		t.Errorf("post: expect %d on %q id %q", e.ExpectSeq, e.ExpectSubject, e.MsgID)
	}
}

// loseAck makes s's publishes go through send, which is given the real
// publish.
func loseAck(s *Store, send func(n int32, real func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error)) {
	var calls atomic.Int32
	s.send = func(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
		return send(calls.Add(1), func() (*jetstream.PubAck, error) { return s.requestCtx(ctx, m) })
	}
}

// An append lands, its ack is lost; the retry with the same msg id is a
// duplicate, and one message is stored.
func TestStore_Append_lostAckRetried(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	m := post(t, s, "T", "m1")
	c := claim(t, s, "T", "A")
	var landed uint64
	loseAck(s, func(n int32, real func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
		pa, err := real()
		if n == 1 && err == nil {
			landed = pa.Sequence
			return nil, nats.ErrTimeout
		}
		return pa, err
	})
	ack, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "echo"), events.Fenced(c))
	if err != nil {
		t.Fatalf("append after a lost ack: %v", err)
	}
	if ack.Seq != landed || !ack.Duplicate {
		t.Fatalf("ack %+v, want duplicate of %d", ack, landed)
	}
	if n := countType(load(t, s, "T"), events.TypeRunStarted); n != 1 {
		t.Fatalf("%d run_started stored, want 1", n)
	}
}

// Spec: StartFenced, ambiguous outcome on R1. The append lands, its ack is
// lost, and a newer claim marker lands before the retry. A single-replica
// stream checks the fence before it deduplicates, so the retry gets 10071;
// the store must read the run subject back, find its msg id, and report
// success.
func TestStore_Append_lostAckThenTakeover(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s, other := open(t, srv), open(t, srv)
	m := post(t, s, "T", "m1")
	c := claim(t, s, "T", "A")
	var landed uint64
	var retryErr atomic.Value
	loseAck(s, func(n int32, real func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
		pa, err := real()
		switch n {
		case 1:
			if err != nil {
				t.Errorf("first attempt: %v", err)
				return pa, err
			}
			landed = pa.Sequence
			newerClaim(t, other, c, "B")
			return nil, nats.ErrTimeout
		case 2:
			retryErr.Store(err)
		}
		return pa, err
	})
	ack, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "echo"), events.Fenced(c))
	if err != nil {
		t.Fatalf("append that landed before a takeover: %v, want success", err)
	}
	if ack.Seq != landed || !ack.Duplicate {
		t.Fatalf("ack %+v, want duplicate of %d", ack, landed)
	}
	if e, _ := retryErr.Load().(error); apiCode(e) != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Fatalf("retry got %v; the test needs the R1 fence-before-dedupe refusal (10071)", e)
	}
	if n := countType(load(t, s, "T"), events.TypeRunStarted); n != 1 {
		t.Fatalf("%d run_started stored, want 1", n)
	}
}

// The same with a compare-and-set: the retry is refused because our own
// first attempt moved the subject.
func TestStore_Append_lostAckCompareAndSet(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	m := post(t, s, "T", "m1")
	c := claim(t, s, "T", "A")
	rs, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "echo"), events.Fenced(c))
	if err != nil {
		t.Fatal(err)
	}
	var landed uint64
	loseAck(s, func(n int32, real func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
		pa, err := real()
		if n == 1 && err == nil {
			landed = pa.Sequence
			return nil, context.DeadlineExceeded
		}
		return pa, err
	})
	ack, err := s.Append(ctxT(t), events.NewRunCompleted(c, time.Now(), "r1", "ok"), events.ExpectLast(rs.Seq))
	if err != nil || ack.Seq != landed {
		t.Fatalf("compare-and-set after a lost ack: %+v %v, want seq %d", ack, err, landed)
	}
}

// The first attempt never reached the server, and a takeover happened:
// the refusal is a real one.
func TestStore_Append_lostRequestThenTakeover(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s, other := open(t, srv), open(t, srv)
	m := post(t, s, "T", "m1")
	c := claim(t, s, "T", "A")
	loseAck(s, func(n int32, real func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
		if n == 1 {
			newerClaim(t, other, c, "B")
			return nil, nats.ErrTimeout // sent nothing
		}
		return real()
	})
	_, err := s.Append(ctxT(t), events.NewRunStarted(c, time.Now(), "r1", m, "echo"), events.Fenced(c))
	if !errors.Is(err, events.ErrThreadBusy) {
		t.Fatalf("append that never landed, after a takeover: %v, want ErrThreadBusy", err)
	}
	if got := lastSeq(t, s, "T", events.KindRun); got != 0 {
		t.Fatalf("run subject at %d, want empty", got)
	}
}

// Every attempt times out: the outcome is unknown, within the bounded wait.
func TestStore_Append_unknownOutcome(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv, func(c *Config) { c.Timeout = time.Second })
	m := post(t, s, "T", "m1")
	c := claim(t, s, "T", "A")
	var calls atomic.Int32
	s.send = func(ctx context.Context, _ *nats.Msg) (*jetstream.PubAck, error) {
		calls.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	start := time.Now()
	_, err := s.Append(context.Background(), events.NewRunStarted(c, time.Now(), "r1", m, "echo"), events.Fenced(c), events.WithMsgID("T:x"))
	if !errors.Is(err, events.ErrUnavailable) || errors.Is(err, events.ErrThreadBusy) || !strings.Contains(err.Error(), "outcome unknown") {
		t.Fatalf("append that always times out: %v, want ErrUnavailable, outcome unknown", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %s with a 1s timeout", d)
	}
	if calls.Load() < 2 {
		t.Fatalf("%d attempts, want retries", calls.Load())
	}
	t.Log(err)
}

func TestStore_Post_badInputWritesNothing(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	_, js := connect(t, srv)
	post(t, s, "T", "m1")
	before := streamMsgs(t, js, DefaultStream)
	for _, id := range []string{"", "a.b", "a*", "a>", strings.Repeat("x", 129)} {
		if _, err := s.Post(ctxT(t), id, &eventspb.MessagePosted{Text: "x"}); !errors.Is(err, events.ErrInvalidThreadID) {
			t.Errorf("post to %q: %v", id, err)
		}
	}
	for _, id := range []string{"a:b", "a b", "ü", strings.Repeat("i", events.MaxMessageIDLen+1)} {
		if _, err := s.Post(ctxT(t), "T", &eventspb.MessagePosted{MessageId: id, Text: "x"}); !errors.Is(err, events.ErrInvalidEvent) {
			t.Errorf("post with message id %q: %v, want ErrInvalidEvent", id, err)
		}
	}
	_, err := s.Post(ctxT(t), "T", &eventspb.MessagePosted{Text: strings.Repeat("x", events.DefaultMaxEventBytes)})
	if !errors.Is(err, events.ErrTooLarge) || !strings.Contains(err.Error(), "1048576-byte limit") {
		t.Errorf("oversized post: %v, want ErrTooLarge naming size and limit", err)
	}
	c := claim(t, s, "T", "A")
	before++ // the claim marker
	big := events.NewRunOutput(c, time.Now(), "r", strings.Repeat("y", events.DefaultMaxEventBytes))
	if _, err := s.Append(ctxT(t), big, events.ExpectLast(0)); !errors.Is(err, events.ErrTooLarge) {
		t.Errorf("oversized append: %v", err)
	}
	if after := streamMsgs(t, js, DefaultStream); after != before {
		t.Fatalf("refused writes stored %d messages", after-before)
	}
}

func countType(envs []events.Envelope, typ events.Type) int {
	n := 0
	for _, e := range envs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// TestStore_Post_repostConflict: reposting an id with the same text is a
// duplicate; with another text or author it is a conflict, and nothing new
// is stored (issue 12: it used to be a silent duplicate).
func TestStore_Post_repostConflict(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	_, js := connect(t, srv)
	first, err := s.Post(ctxT(t), "T", &eventspb.MessagePosted{MessageId: "m1", Author: "ann", Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Post(ctxT(t), "T", &eventspb.MessagePosted{MessageId: "m1", Author: "ann", Text: "hello"})
	if err != nil || !again.Duplicate || again.Seq != first.Seq {
		t.Fatalf("same repost: %+v, %v; want a duplicate of %d", again, err, first.Seq)
	}
	for _, m := range []*eventspb.MessagePosted{
		{MessageId: "m1", Author: "ann", Text: "goodbye"},
		{MessageId: "m1", Author: "bob", Text: "hello"},
	} {
		_, err := s.Post(ctxT(t), "T", m)
		if !errors.Is(err, events.ErrConflict) || !strings.Contains(err.Error(), `"m1"`) {
			t.Errorf("repost of m1 as %q by %q: %v, want ErrConflict naming the id", m.Text, m.Author, err)
		}
	}
	// Ids are per thread: the same id elsewhere is a new message.
	if ack, err := s.Post(ctxT(t), "U", &eventspb.MessagePosted{MessageId: "m1", Text: "other"}); err != nil || ack.Duplicate {
		t.Errorf("m1 in another thread: %+v, %v", ack, err)
	}
	if n := streamMsgs(t, js, DefaultStream); n != 2 {
		t.Errorf("%d messages stored, want 2", n)
	}
}

// TestStore_Post_lostAckNoConflict: a post whose ack was lost is retried
// and comes back as a duplicate of itself, which is not a conflict.
func TestStore_Post_lostAckNoConflict(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	loseAck(s, func(n int32, real func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
		pa, err := real()
		if n == 1 && err == nil {
			return nil, nats.ErrTimeout
		}
		return pa, err
	})
	ack, err := s.Post(ctxT(t), "T", &eventspb.MessagePosted{MessageId: "m1", Text: "hello"})
	if err != nil || !ack.Duplicate {
		t.Fatalf("post after a lost ack: %+v, %v; want a duplicate ack", ack, err)
	}
}
