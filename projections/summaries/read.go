package summaries

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
)

// Lag is how far the read model is behind the stream, from what is stored:
// any process can read it, the projector's own or not.
type Lag struct {
	// Partition is the partition whose stream and projector it is: 0 with
	// one partition.
	Partition     int    `json:"partition,omitempty"`
	Bucket        string `json:"bucket"`
	StreamLastSeq uint64 `json:"stream_last_seq"`
	// Checkpoint is the sequence every event up to which is applied, and
	// Behind the events after it: StreamLastSeq - Checkpoint.
	Checkpoint uint64 `json:"checkpoint"`
	Behind     uint64 `json:"behind"`
	Epoch      uint64 `json:"epoch"`
	// Durable is the feeding consumer; NumPending its events not yet
	// delivered and NumAckPending those delivered and not yet acked.
	Durable       string `json:"durable"`
	DurableExists bool   `json:"durable_exists"`
	NumPending    uint64 `json:"num_pending"`
	NumAckPending int    `json:"num_ack_pending"`
	// Owner is the projector that holds the read model, "" when none;
	// OwnerLive whether its lease has not lapsed by the reader's clock.
	Owner     string    `json:"owner"`
	OwnerLive bool      `json:"owner_live"`
	Updated   time.Time `json:"updated"` // the checkpoint's last write
}

// ReadLag reads the lag of the read model in bucket, fed by the durable
// consumer durable (the checkpoint's, when it names one). With partitions it
// is the lag of the partition furthest behind ([ReadLags] has each). It
// returns an error wrapping [ErrNoReadModel] when the bucket does not exist.
func ReadLag(ctx context.Context, store events.ReadModelStore, bucket, durable string) (Lag, error) {
	lags, err := ReadLags(ctx, store, bucket, durable)
	if err != nil {
		return Lag{}, err
	}
	worst := lags[0]
	for _, l := range lags[1:] {
		if l.Behind > worst.Behind {
			worst = l
		}
	}
	return worst, nil
}

// ReadLags reads the lag of each partition's projector, in partition
// order: one with one partition.
func ReadLags(ctx context.Context, store events.ReadModelStore, bucket, durable string) ([]Lag, error) {
	lags := make([]Lag, store.Subjects().PartitionCount())
	for p := range lags {
		l, err := ReadPartitionLag(ctx, store, bucket, durable, p)
		if err != nil {
			return nil, err
		}
		lags[p] = l
	}
	return lags, nil
}

// ReadPartitionLag reads the lag of partition p's projector against its
// partition's stream, fed by the durable consumer durable on that stream
// (the checkpoint's, when it names one).
func ReadPartitionLag(ctx context.Context, store events.ReadModelStore, bucket, durable string, p int) (Lag, error) {
	b, err := openBucket(ctx, store, bucket)
	if err != nil {
		return Lag{}, err
	}
	subj := store.Subjects()
	cp, _, err := readCheckpoint(ctx, b, CheckpointKeyOf(subj, p))
	if err != nil {
		return Lag{}, err
	}
	last, err := store.LastPartitionSeq(ctx, p)
	if err != nil {
		return Lag{}, err
	}
	if cp.Durable != "" {
		durable = cp.Durable
	}
	l := Lag{
		Partition: p, Bucket: bucket, StreamLastSeq: last, Checkpoint: cp.Seq, Epoch: cp.Epoch, Durable: durable,
		Owner: cp.Owner, OwnerLive: cp.Owner != "" && cp.Expires.After(time.Now()), Updated: cp.Updated,
	}
	if last > cp.Seq {
		l.Behind = last - cp.Seq
	}
	info, err := store.PartitionDurableState(ctx, p, durable)
	switch {
	case err == nil:
		l.DurableExists, l.NumPending, l.NumAckPending = true, info.NumPending, info.NumAckPending
	case !errors.Is(err, events.ErrNotFound):
		return Lag{}, err
	}
	return l, nil
}

func openBucket(ctx context.Context, store events.ReadModelStore, bucket string) (events.KVBucket, error) {
	b, err := store.OpenBucket(ctx, bucket, false)
	if errors.Is(err, events.ErrNotFound) {
		return nil, errors.Join(ErrNoReadModel, err)
	}
	return b, err
}

// Snapshot is every thread's summary as of one stream sequence per
// partition.
type Snapshot struct {
	Summaries  []Summary  // sorted by thread id
	Checkpoint Checkpoint // the read model's checkpoint when read (partition 0's)
	// LastSeq is the stream sequence the snapshot is exact at: the
	// stream's last when Read was called (partition 0's).
	LastSeq uint64
	// Checkpoints and LastSeqs are each partition's Checkpoint and LastSeq,
	// in partition order: with partitions each stream has its own
	// sequences.
	Checkpoints []Checkpoint
	LastSeqs    []uint64
	// Folded is how many events after the checkpoints Read folded itself:
	// the read model's lag, paid by the reader.
	Folded uint64
}

// Read returns every thread's summary, exact as of each partition stream's
// last sequence at the call: the stored summaries of their partition's
// checkpoint epoch, with the events after the checkpoint folded in by the
// reader. A lagging or stopped projector makes Read slower, never wrong. It
// costs one scan of the bucket and one replay of each stream's tail. It
// returns an error wrapping [ErrNoReadModel] when the bucket does not
// exist.
func Read(ctx context.Context, store events.ReadModelStore, bucket string) (Snapshot, error) {
	b, err := openBucket(ctx, store, bucket)
	if err != nil {
		return Snapshot{}, err
	}
	subj := store.Subjects()
	n := subj.PartitionCount()
	// The checkpoints first: summaries read after them cover at least
	// them. A rebuild starting meanwhile would purge them under the scan,
	// so the checkpoints are read again after it, and the scan redone if an
	// epoch moved.
	var cps []Checkpoint
	var sums map[string]*Summary
	for attempt := 0; ; attempt++ {
		if cps, err = readCheckpoints(ctx, b, subj); err != nil {
			return Snapshot{}, err
		}
		var bad []string
		epoch := func(th string) uint64 { return cps[subj.PartitionOf(th)].Epoch }
		if sums, bad, err = scan(ctx, b, epoch); err != nil {
			return Snapshot{}, err
		}
		seq := func(th string) uint64 { return cps[subj.PartitionOf(th)].Seq }
		if err := refold(ctx, store, sums, bad, seq); err != nil {
			return Snapshot{}, err
		}
		after, err := readCheckpoints(ctx, b, subj)
		if err != nil {
			return Snapshot{}, err
		}
		if sameEpochs(cps, after) {
			break
		}
		if attempt == 2 {
			cps, sums = make([]Checkpoint, n), map[string]*Summary{} // rebuilding: fold it all
			break
		}
	}
	snap := Snapshot{Checkpoint: cps[0], Checkpoints: cps, LastSeqs: make([]uint64, n)}
	for p := range n {
		snap.LastSeqs[p], err = store.Replay(ctx, subj.PartitionAll(p), cps[p].Seq+1, func(env events.Envelope) error {
			if events.ValidateThreadID(env.Thread) != nil {
				return nil
			}
			s := sums[env.Thread]
			if s == nil {
				e := Empty(env.Thread)
				s = &e
				sums[env.Thread] = s
			}
			if err := projections.ResolveFork(ctx, store, &env); err != nil {
				return err
			}
			s.apply(&env)
			snap.Folded++
			return nil
		})
		if err != nil {
			return Snapshot{}, err
		}
	}
	snap.LastSeq = snap.LastSeqs[0]
	snap.Summaries = make([]Summary, 0, len(sums))
	for _, s := range sums {
		s.normalize()
		snap.Summaries = append(snap.Summaries, *s)
	}
	slices.SortFunc(snap.Summaries, func(a, b Summary) int { return strings.Compare(a.Thread, b.Thread) })
	return snap, nil
}

// readCheckpoints reads every partition's checkpoint, in partition order.
func readCheckpoints(ctx context.Context, b events.KVBucket, subj events.Subjects) ([]Checkpoint, error) {
	cps := make([]Checkpoint, subj.PartitionCount())
	for p := range cps {
		cp, _, err := readCheckpoint(ctx, b, CheckpointKeyOf(subj, p))
		if err != nil {
			return nil, err
		}
		cps[p] = cp
	}
	return cps, nil
}

func sameEpochs(a, b []Checkpoint) bool {
	for i := range a {
		if a[i].Epoch != b[i].Epoch {
			return false
		}
	}
	return true
}

// scan reads the stored summaries of their partition's epoch. Those of
// another epoch count as absent; bad lists the keys whose value does not
// decode.
func scan(ctx context.Context, b events.KVBucket, epoch func(thread string) uint64) (sums map[string]*Summary, bad []string, err error) {
	sums = map[string]*Summary{}
	err = b.Scan(ctx, threadKeys, func(e events.KVEntry) error {
		var st stored
		switch {
		case json.Unmarshal(e.Value, &st) != nil || st.Thread != e.Key:
			bad = append(bad, e.Key)
		case st.Epoch == epoch(e.Key):
			sums[e.Key] = &st.Summary
		}
		return nil
	})
	return sums, bad, err
}

// refold folds the threads whose stored summary is unreadable from their
// events up to their partition's checkpoint seq, as the projector does.
func refold(ctx context.Context, store events.ReadModelStore, sums map[string]*Summary, threads []string, seq func(thread string) uint64) error {
	for _, th := range threads {
		envs, err := store.Load(ctx, th, 1)
		if err == nil {
			err = projections.ResolveFirst(ctx, store, envs)
		}
		if err != nil {
			return err
		}
		s := Empty(th)
		for i := range envs {
			if envs[i].Seq <= seq(th) {
				s.apply(&envs[i])
			}
		}
		sums[th] = &s
	}
	return nil
}
