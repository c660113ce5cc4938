package summaries

import (
	"fmt"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/projections"
)

// Read right after writes, while the projector is rewriting the summaries
// of the threads they touched, is exact at its LastSeq every time: a
// thread the checkpoint covers is never read from the tail alone.
func TestRead_exactWhileProjectorRewrites(t *testing.T) {
	const seed, chunk = 7, 15
	t.Logf("seed %d", seed)
	srv := natsembedtest.RunForTest(t)
	s := openStore(t, srv)
	pub := newPublisher(t, srv, testLog(seed, 1500))
	p := newTestProjector(t, s, "live", func(c *Config) { c.Batch = 5 })
	runInBackground(t, p)
	threads := map[string]*projections.Thread{}
	pub.publish(t, chunk)
	waitCaughtUp(t, p) // the bucket exists
	var refSeq uint64
	for pub.next < len(pub.msgs) {
		pub.publish(t, chunk)
		snap, err := Read(ctxT(t), s, "live")
		if err != nil {
			t.Fatal(err)
		}
		// Nothing else writes the stream: its tail is the reference's.
		_, err = s.Replay(ctxT(t), "threads.>", refSeq+1, func(env events.Envelope) error {
			if env.Seq > snap.LastSeq || events.ValidateThreadID(env.Thread) != nil {
				return nil
			}
			if threads[env.Thread] == nil {
				threads[env.Thread] = projections.New(env.Thread)
			}
			threads[env.Thread].Apply(env)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		refSeq = snap.LastSeq
		want := map[string]Summary{}
		for id, th := range threads {
			want[id] = FromThread(th)
		}
		got := map[string]Summary{}
		for _, sum := range snap.Summaries {
			got[sum.Thread] = sum
		}
		sameSummaries(t, fmt.Sprintf("Read at %d (checkpoint %d)", snap.LastSeq, snap.Checkpoint.Seq), got, want)
	}
}
