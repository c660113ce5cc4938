package summaries

import (
	"context"
	"time"

	"github.com/artifactr/artifactr/events"
)

// Rebuild rebuilds the read model of cfg.Partition from the first event of
// its stream up to its last when Rebuild is called, then releases it to whichever projector
// runs next (`artifactr serve` resumes from the new checkpoint).
//
// It takes the read model over, refusing with an error wrapping [ErrOwned]
// while another live projector owns it unless force is set. Then, in an
// order that stays correct if it crashes at any step: it writes a new
// epoch at checkpoint 0, so every summary stored before counts as absent
// and the previous owner is fenced out of the checkpoint; it deletes the
// durable consumer and purges the old summaries; and it replays every event
// through a new durable consumer, as a projector catching up from zero
// does. cfg.Progress reports each batch.
func Rebuild(ctx context.Context, cfg Config, force bool) (Stats, error) {
	p, err := NewProjector(cfg)
	if err != nil {
		return Stats{}, err
	}
	b, err := p.store.OpenBucket(ctx, p.cfg.Bucket, true)
	if err != nil {
		return Stats{}, err
	}
	own, err := p.acquire(ctx, b, force)
	if err != nil {
		return Stats{}, err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		own.release(rctx)
	}()
	own.cp.Seq, own.cp.Epoch = 0, own.cp.Epoch+1
	if err := own.write(ctx); err != nil {
		return p.Stats(), err
	}
	if err := p.store.DeletePartitionDurable(ctx, p.cfg.Partition, p.cfg.Durable); err != nil {
		return p.Stats(), err
	}
	if err := p.purge(ctx, b); err != nil {
		return p.Stats(), err
	}
	target, err := p.store.LastPartitionSeq(ctx, p.cfg.Partition)
	if err != nil || target == 0 {
		return p.Stats(), err
	}
	err = p.session(ctx, own, target)
	return p.Stats(), err
}

// purge removes the summaries of the projector's partition: every thread's
// with one partition, in one purge; with several, the partition's threads'
// one by one, since their keys share no prefix. A key it misses is of the
// old epoch, so it counts as absent anyway.
func (p *Projector) purge(ctx context.Context, b events.KVBucket) error {
	subj := p.store.Subjects()
	if !subj.Partitioned() {
		return b.Purge(ctx, threadKeys)
	}
	var mine []string
	err := b.Scan(ctx, threadKeys, func(e events.KVEntry) error {
		if subj.PartitionOf(e.Key) == p.cfg.Partition {
			mine = append(mine, e.Key)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range mine {
		if err := b.Purge(ctx, k); err != nil {
			return err
		}
	}
	return nil
}
