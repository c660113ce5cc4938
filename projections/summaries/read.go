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
// consumer durable (the checkpoint's, when it names one). It returns an
// error wrapping [ErrNoReadModel] when the bucket does not exist.
func ReadLag(ctx context.Context, store events.ReadModelStore, bucket, durable string) (Lag, error) {
	b, err := openBucket(ctx, store, bucket)
	if err != nil {
		return Lag{}, err
	}
	cp, _, err := readCheckpoint(ctx, b)
	if err != nil {
		return Lag{}, err
	}
	last, err := store.LastStreamSeq(ctx)
	if err != nil {
		return Lag{}, err
	}
	if cp.Durable != "" {
		durable = cp.Durable
	}
	l := Lag{
		Bucket: bucket, StreamLastSeq: last, Checkpoint: cp.Seq, Epoch: cp.Epoch, Durable: durable,
		Owner: cp.Owner, OwnerLive: cp.Owner != "" && cp.Expires.After(time.Now()), Updated: cp.Updated,
	}
	if last > cp.Seq {
		l.Behind = last - cp.Seq
	}
	info, err := store.DurableState(ctx, durable)
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

// Snapshot is every thread's summary as of one stream sequence.
type Snapshot struct {
	Summaries  []Summary  // sorted by thread id
	Checkpoint Checkpoint // the read model's checkpoint when read
	// LastSeq is the stream sequence the snapshot is exact at: the
	// stream's last when Read was called.
	LastSeq uint64
	// Folded is how many events after the checkpoint Read folded itself:
	// the read model's lag, paid by the reader.
	Folded uint64
}

// Read returns every thread's summary, exact as of the stream's last
// sequence at the call: the stored summaries of the checkpoint's epoch,
// with the events after the checkpoint folded in by the reader. A lagging
// or stopped projector makes Read slower, never wrong. It costs one scan of
// the bucket and one replay of the stream's tail. It returns an error
// wrapping [ErrNoReadModel] when the bucket does not exist.
func Read(ctx context.Context, store events.ReadModelStore, bucket string) (Snapshot, error) {
	b, err := openBucket(ctx, store, bucket)
	if err != nil {
		return Snapshot{}, err
	}
	// The checkpoint first: summaries read after it cover at least it. A
	// rebuild starting meanwhile would purge them under the scan, so the
	// checkpoint is read again after it, and the scan redone if its epoch
	// moved.
	var cp Checkpoint
	var sums map[string]*Summary
	for attempt := 0; ; attempt++ {
		if cp, _, err = readCheckpoint(ctx, b); err != nil {
			return Snapshot{}, err
		}
		var bad []string
		if sums, bad, err = scan(ctx, b, cp.Epoch); err != nil {
			return Snapshot{}, err
		}
		if err := refold(ctx, store, sums, bad, cp.Seq); err != nil {
			return Snapshot{}, err
		}
		after, _, err := readCheckpoint(ctx, b)
		if err != nil {
			return Snapshot{}, err
		}
		if after.Epoch == cp.Epoch {
			break
		}
		if attempt == 2 {
			cp, sums = Checkpoint{}, map[string]*Summary{} // rebuilding: fold it all
			break
		}
	}
	snap := Snapshot{Checkpoint: cp}
	snap.LastSeq, err = store.Replay(ctx, events.Subjects{Prefix: prefixOf(store)}.All(), cp.Seq+1, func(env events.Envelope) error {
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
	snap.Summaries = make([]Summary, 0, len(sums))
	for _, s := range sums {
		s.normalize()
		snap.Summaries = append(snap.Summaries, *s)
	}
	slices.SortFunc(snap.Summaries, func(a, b Summary) int { return strings.Compare(a.Thread, b.Thread) })
	return snap, nil
}

// scan reads the stored summaries of epoch. Those of another epoch count
// as absent; bad lists the keys whose value does not decode.
func scan(ctx context.Context, b events.KVBucket, epoch uint64) (sums map[string]*Summary, bad []string, err error) {
	sums = map[string]*Summary{}
	err = b.Scan(ctx, threadKeys, func(e events.KVEntry) error {
		var st stored
		switch {
		case json.Unmarshal(e.Value, &st) != nil || st.Thread != e.Key:
			bad = append(bad, e.Key)
		case st.Epoch == epoch:
			sums[e.Key] = &st.Summary
		}
		return nil
	})
	return sums, bad, err
}

// refold folds the threads whose stored summary is unreadable from their
// events up to seq, as the projector does.
func refold(ctx context.Context, store events.ReadModelStore, sums map[string]*Summary, threads []string, seq uint64) error {
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
			if envs[i].Seq <= seq {
				s.apply(&envs[i])
			}
		}
		sums[th] = &s
	}
	return nil
}

// prefixOf is the store's subject prefix.
func prefixOf(store events.ReadModelStore) string { return store.Subjects().Prefix }
