package natsstore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// Replay reads the whole stream in order up to its last sequence at the
// call; garbage on a subject is passed on with Err set and stops nothing.
func TestStore_Replay_wholeStreamWithGarbage(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	_, js := connect(t, srv)
	var want []uint64
	for i := range 3*replayChunk + 5 {
		want = append(want, post(t, s, fmt.Sprintf("t%d", i%7), fmt.Sprintf("m%d", i)))
		if i == 10 {
			ack, err := js.Publish(ctxT(t), "threads.t3.run", []byte{0xff, 0x00, 0x13, 0x37})
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, ack.Sequence)
		}
	}
	if got, err := s.LastStreamSeq(ctxT(t)); err != nil || got != want[len(want)-1] {
		t.Fatalf("LastStreamSeq = %d, %v; want %d", got, err, want[len(want)-1])
	}
	var got []uint64
	bad := 0
	last, err := s.Replay(ctxT(t), "threads.>", 0, func(env events.Envelope) error {
		got = append(got, env.Seq)
		if env.Err != nil {
			bad++
		}
		if len(got) == 20 {
			post(t, s, "late", "after-the-call") // past last: not replayed
		}
		return nil
	})
	if err != nil || last != want[len(want)-1] {
		t.Fatalf("Replay: last %d, %v", last, err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || bad != 1 {
		t.Fatalf("replayed %d events (%d bad), want %d (1 bad)", len(got), bad, len(want))
	}
	// From the middle, one thread, and raw.
	n := 0
	if _, err := s.Replay(ctxT(t), "threads.t3.>", want[50], func(env events.Envelope) error {
		if env.Thread != "t3" || env.Seq < want[50] {
			t.Errorf("got %s seq %d", env.Thread, env.Seq)
		}
		n++
		return nil
	}); err != nil || n == 0 {
		t.Fatalf("filtered replay: %d events, %v", n, err)
	}
	raw := 0
	if _, err := s.ReplayRaw(ctxT(t), "threads.>", 1, func(m RawMsg) error { raw++; return nil }); err != nil || raw != len(want)+1 {
		t.Fatalf("raw replay: %d, %v; want %d", raw, err, len(want)+1)
	}
}

// An error from fn stops the replay and is returned; an empty stream or a
// start past the end calls fn never.
func TestStore_Replay_stopsAndEmpty(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	calls := 0
	last, err := s.Replay(ctxT(t), "threads.>", 1, func(events.Envelope) error { calls++; return nil })
	if err != nil || last != 0 || calls != 0 {
		t.Fatalf("empty stream: last %d, %d calls, %v", last, calls, err)
	}
	for i := range 2000 {
		post(t, s, "T", fmt.Sprint(i))
	}
	boom := errors.New("boom")
	_, err = s.Replay(ctxT(t), "threads.>", 1, func(env events.Envelope) error {
		if calls++; calls == 700 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls != 700 {
		t.Fatalf("Replay with failing fn: %v after %d calls", err, calls)
	}
	calls = 0
	if _, err := s.Replay(ctxT(t), "threads.>", 5000, func(events.Envelope) error { calls++; return nil }); err != nil || calls != 0 {
		t.Fatalf("from past the end: %d calls, %v", calls, err)
	}
	if seq, ok, err := s.NextSeq(ctxT(t), 1500); err != nil || !ok || seq != 1500 {
		t.Fatalf("NextSeq(1500) = %d %v %v", seq, ok, err)
	}
	if _, ok, err := s.NextSeq(ctxT(t), 2001); err != nil || ok {
		t.Fatalf("NextSeq past the end: %v %v", ok, err)
	}
}
