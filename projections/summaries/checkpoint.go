package summaries

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/artifactr/artifactr/events"
)

// CheckpointKey is the bucket key of the [Checkpoint]. Thread ids cannot
// contain a dot, so it never collides with a thread's summary.
const CheckpointKey = "_meta.checkpoint"

// CheckpointKeyOf is the key of partition p's checkpoint: [CheckpointKey]
// with one partition, _meta.checkpoint.p<p> with several, since each
// partition's stream has its own sequences.
func CheckpointKeyOf(subj events.Subjects, p int) string {
	if !subj.Partitioned() {
		return CheckpointKey
	}
	return CheckpointKey + ".p" + strconv.Itoa(p)
}

// threadKeys is the key filter of the summaries: keys of one token.
const threadKeys = "*"

// Checkpoint is the read model's own record, stored as JSON under
// [CheckpointKey]:
//
//	{"seq": 1234, "epoch": 2, "owner": "host-1-ab12/summaries",
//	 "expires": "...", "updated": "...", "durable": "summaries"}
//
// Seq is the stream sequence up to which every event is applied: every
// thread with an event at or below Seq has a summary of this epoch that
// includes it. It is the lag's base and where a projector resumes.
//
// Owner holds the read model: only the owner feeds it. Its lease runs to
// Expires by the owner's clock and is renewed by every checkpoint write, a
// compare-and-set on this key, so an owner that lost the key to another
// learns it at its next write and stops. Owner is "" once released.
//
// Epoch counts rebuilds. Summaries are stored with the epoch they were
// written in, and one of another epoch counts as absent, so a write that
// lands from a projector that was taken over during a rebuild is ignored.
type Checkpoint struct {
	Seq     uint64    `json:"seq"`
	Epoch   uint64    `json:"epoch"`
	Owner   string    `json:"owner"`
	Expires time.Time `json:"expires"`
	Updated time.Time `json:"updated"`
	Durable string    `json:"durable"`
}

// ErrOwned is returned when another live projector owns the read model.
var ErrOwned = errors.New("summaries: read model owned by another projector")

// ErrNoReadModel is returned by readers when the bucket does not exist: no
// projector has run yet. Callers fall back to folding the stream.
var ErrNoReadModel = errors.New("summaries: no read model yet")

// errLost ends a session whose checkpoint write was refused: another
// projector took the read model over.
var errLost = errors.New("summaries: ownership lost")

// stored is a summary as the bucket holds it: the summary's fields and the
// epoch it was written in.
type stored struct {
	Summary
	Epoch uint64 `json:"epoch"`
}

// readCheckpoint reads the checkpoint under key and its revision. A missing
// or unreadable checkpoint reads as the zero one (resume from the start: the
// summaries' own sequences make that safe).
func readCheckpoint(ctx context.Context, b events.KVBucket, key string) (Checkpoint, uint64, error) {
	e, found, err := b.Get(ctx, key)
	if err != nil {
		return Checkpoint{}, 0, err
	}
	var cp Checkpoint
	if found {
		if err := json.Unmarshal(e.Value, &cp); err != nil {
			cp = Checkpoint{}
		}
	}
	return cp, e.Revision, nil
}

// owner is a held checkpoint: the projector's lease on the read model.
type owner struct {
	p       *Projector
	b       events.KVBucket
	cp      Checkpoint
	rev     uint64    // the checkpoint key's revision: the CAS token
	renewed time.Time // when it was last written, by the projector's clock
}

// acquire takes the read model if it is free, lapsed, or already this
// projector's; with force, whoever holds it. It returns an error wrapping
// ErrOwned otherwise.
func (p *Projector) acquire(ctx context.Context, b events.KVBucket, force bool) (*owner, error) {
	for range 20 {
		o, err := p.tryAcquire(ctx, b, force)
		if !force || !errors.Is(err, ErrOwned) {
			return o, err
		}
		// Forced: the owner wrote its checkpoint between our read and
		// write; read it again.
	}
	return nil, fmt.Errorf("%w: its checkpoint kept moving", ErrOwned)
}

func (p *Projector) tryAcquire(ctx context.Context, b events.KVBucket, force bool) (*owner, error) {
	cp, rev, err := readCheckpoint(ctx, b, p.checkpointKey())
	if err != nil {
		return nil, err
	}
	now := p.cfg.Now()
	if !force && cp.Owner != "" && cp.Owner != p.cfg.Owner && cp.Expires.After(now) {
		return nil, fmt.Errorf("%w: %s, lease until %s (%s from now by this clock)", ErrOwned, cp.Owner,
			cp.Expires.UTC().Format(time.RFC3339), cp.Expires.Sub(now).Round(time.Millisecond))
	}
	o := &owner{p: p, b: b, cp: cp, rev: rev}
	o.cp.Owner, o.cp.Durable = p.cfg.Owner, p.cfg.Durable
	if err := o.write(ctx); err != nil {
		if errors.Is(err, errLost) {
			return nil, fmt.Errorf("%w: taken by another projector while acquiring it", ErrOwned)
		}
		return nil, err
	}
	return o, nil
}

// write stores the checkpoint by compare-and-set, extending the lease. A
// refusal returns errLost: another projector wrote the key.
func (o *owner) write(ctx context.Context) error {
	now := o.p.cfg.Now()
	cp := o.cp
	cp.Expires, cp.Updated = now.Add(o.p.cfg.LeaseTTL), now
	data, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	rev, err := o.b.Put(ctx, o.p.checkpointKey(), data, o.rev)
	if errors.Is(err, events.ErrConflict) {
		return fmt.Errorf("%w: %w", errLost, err)
	}
	if err != nil {
		return err
	}
	o.cp, o.rev, o.renewed = cp, rev, now
	return nil
}

// due reports whether the lease should be renewed: a third of its TTL has
// passed since the last write.
func (o *owner) due() bool {
	return o.p.cfg.Now().Sub(o.renewed) >= o.p.cfg.LeaseTTL/3
}

// live reports whether the lease has not run out by the projector's clock.
// A projector stops writing once it has: another may have taken over.
func (o *owner) live() bool { return o.p.cfg.Now().Before(o.cp.Expires) }

// release gives the read model up, so another projector takes it at once.
// It keeps the checkpoint. A refusal means it was lost already.
func (o *owner) release(ctx context.Context) {
	o.cp.Owner = ""
	now := o.p.cfg.Now()
	cp := o.cp
	cp.Expires, cp.Updated = time.Time{}, now
	if data, err := json.Marshal(cp); err == nil {
		_, _ = o.b.Put(ctx, o.p.checkpointKey(), data, o.rev)
	}
}

// checkpointKey is the key of the projector's partition's checkpoint.
func (p *Projector) checkpointKey() string {
	return CheckpointKeyOf(p.store.Subjects(), p.cfg.Partition)
}
