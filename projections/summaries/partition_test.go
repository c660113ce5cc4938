package summaries

import (
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/internal/eventgen"
)

// partitionedMsgs returns msgs, written for one partition, on the subjects
// of subj: each thread's events in its partition's stream. Messages on no
// thread's subject are dropped: no partition's stream would hold them.
func partitionedMsgs(msgs []eventgen.Msg, subj events.Subjects) []eventgen.Msg {
	var out []eventgen.Msg
	for _, m := range msgs {
		th, k, ok := events.Subjects{}.Parse(m.Subject)
		if !ok {
			continue
		}
		m.Subject = subj.Thread(th, k)
		out = append(out, m)
	}
	return out
}

// With four partitions there is one projector per partition, each with its
// own checkpoint key and durable consumer on its own stream: together they
// store every thread's summary, each the reference fold's; Read, the lags
// and a rebuild of one partition agree.
func TestProjector_partitions_memstore(t *testing.T) {
	subj := events.Subjects{Partitions: 4}
	log := memstore.NewLog()
	s := log.Open(memstore.Config{Subjects: subj})
	msgs := partitionedMsgs(testLog(3, 4000).Msgs, subj)
	publish := func(n int) {
		for _, m := range msgs[:min(n, len(msgs))] {
			log.PublishRaw(m.Subject, m.Header, m.Data)
		}
		msgs = msgs[min(n, len(msgs)):]
	}
	publish(1000)
	ps, err := NewProjectors(Config{Store: s, Bucket: "parts", Owner: "test-parts", LeaseTTL: 3e9, Batch: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 4 {
		t.Fatalf("%d projectors, want 4", len(ps))
	}
	var stops []func()
	for _, p := range ps {
		stops = append(stops, runInBackground(t, p))
	}
	for len(msgs) > 0 {
		publish(500)
	}
	for _, p := range ps {
		if l := waitCaughtUp(t, p); l.Partition != p.Partition() || l.Durable != DefaultDurable {
			t.Fatalf("partition %d: lag %+v", p.Partition(), l)
		}
	}
	for _, stop := range stops {
		stop()
	}
	want := reference(t, s)
	if len(want) < 8 {
		t.Fatalf("only %d threads", len(want))
	}
	sameSummaries(t, "projected", storedSummaries(t, s, "parts"), want)

	lags, err := ReadLags(ctxT(t), s, "parts", DefaultDurable)
	if err != nil || len(lags) != 4 {
		t.Fatalf("ReadLags: %+v, %v", lags, err)
	}
	for p, l := range lags {
		last, _ := s.LastPartitionSeq(ctxT(t), p)
		if l.Behind != 0 || l.Checkpoint != last || last == 0 {
			t.Fatalf("partition %d: lag %+v, stream at %d", p, l, last)
		}
	}

	// A rebuild of partition 2 alone moves its epoch only; the others'
	// summaries stay.
	if _, err := Rebuild(ctxT(t), Config{Store: s, Bucket: "parts", Partition: 2, Batch: 70}, false); err != nil {
		t.Fatal(err)
	}
	sameSummaries(t, "after rebuilding partition 2", storedSummaries(t, s, "parts"), want)
	snap, err := Read(ctxT(t), s, "parts")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Folded != 0 || len(snap.Checkpoints) != 4 || snap.Checkpoints[2].Epoch != 1 || snap.Checkpoints[1].Epoch != 0 {
		t.Fatalf("Read: folded %d, checkpoints %+v", snap.Folded, snap.Checkpoints)
	}
	got := map[string]Summary{}
	for _, sum := range snap.Summaries {
		got[sum.Thread] = sum
	}
	sameSummaries(t, "Read", got, want)
}
