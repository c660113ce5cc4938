package summaries

import (
	"testing"

	"github.com/artifactr/artifactr/events/memstore"
)

// The projector needs only the read models' port: on memstore, with no
// server, it builds incrementally while events stream in, and a rebuild
// from zero gives the same summaries, each the reference fold's. This is
// TestProjector_rebuildEqualsIncremental's first half on the fake.
func TestProjector_rebuildEqualsIncremental_memstore(t *testing.T) {
	log := memstore.NewLog()
	s := log.Open(memstore.Config{})
	msgs := testLog(1, 6000).Msgs
	publish := func(n int) {
		for _, m := range msgs[:min(n, len(msgs))] {
			log.PublishRaw(m.Subject, m.Header, m.Data)
		}
		msgs = msgs[min(n, len(msgs)):]
	}
	publish(1500) // some history before the projector starts
	inc := newTestProjector(t, s, "incremental")
	stop := runInBackground(t, inc)
	for len(msgs) > 0 {
		publish(700)
	}
	waitCaughtUp(t, inc)
	stop()
	want := reference(t, s)
	sameSummaries(t, "incremental", storedSummaries(t, s, "incremental"), want)

	fresh := Config{Store: s, Bucket: "rebuilt", Durable: "rebuilt", Batch: 500}
	if _, err := Rebuild(ctxT(t), fresh, false); err != nil {
		t.Fatal(err)
	}
	sameSummaries(t, "rebuilt", storedSummaries(t, s, "rebuilt"), want)
	l, err := ReadLag(ctxT(t), s, "incremental", "incremental")
	if err != nil || l.Behind != 0 || l.Checkpoint != uint64(log.Len()) {
		t.Fatalf("lag after the run: %+v, %v", l, err)
	}
}
