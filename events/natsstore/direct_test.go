package natsstore

import (
	"fmt"
	"testing"

	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// Load reads with direct gets: every event, across batches, from any
// sequence, and no consumer is left on (or made on) the server.
func TestStore_Load_direct(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	if !s.direct {
		t.Fatal("a new single-replica stream should allow direct reads")
	}
	const n = directBatch + 250 // more than one batch
	var seqs []uint64
	for i := range n {
		seqs = append(seqs, post(t, s, "big", fmt.Sprintf("m%d", i)))
		if i%100 == 0 {
			post(t, s, "other", fmt.Sprintf("o%d", i)) // interleaved, filtered out
		}
	}
	envs, err := s.Load(ctxT(t), "big", 1)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if len(envs) != n {
		t.Fatalf("loaded %d events, want %d", len(envs), n)
	}
	for i, env := range envs {
		if env.Seq != seqs[i] || env.Err != nil || env.Thread != "big" {
			t.Fatalf("event %d: seq %d (want %d) thread %q err %v", i, env.Seq, seqs[i], env.Thread, env.Err)
		}
	}
	from := seqs[n-10]
	envs, err = s.Load(ctxT(t), "big", from)
	if err != nil || len(envs) != 10 || envs[0].Seq != from {
		t.Fatalf("load from %d: %d events, err %v", from, len(envs), err)
	}
	envs, err = s.Load(ctxT(t), "nothing-here", 1)
	if err != nil || len(envs) != 0 {
		t.Fatalf("load of an empty thread: %d events, err %v", len(envs), err)
	}
	info, err := s.streams[0].Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers != 0 {
		t.Fatalf("%d consumers on the server after loads, want 0", info.State.Consumers)
	}
}
