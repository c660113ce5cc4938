package summaries

import (
	"context"
	"time"
)

// Rebuild rebuilds the read model from the first event of the stream up to
// its last when Rebuild is called, then releases it to whichever projector
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
	if err := p.store.DeleteDurable(ctx, p.cfg.Durable); err != nil {
		return p.Stats(), err
	}
	if err := b.Purge(ctx, threadKeys); err != nil {
		return p.Stats(), err
	}
	target, err := p.store.LastStreamSeq(ctx)
	if err != nil || target == 0 {
		return p.Stats(), err
	}
	err = p.session(ctx, own, target)
	return p.Stats(), err
}
