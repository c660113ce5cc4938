package runner

import (
	"context"
	"fmt"

	"github.com/artifactr/artifactr/actors/runner/sched"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
)

// claimResult reports a claim, with the view it loaded, which the
// scheduler does not look at.
type claimResult struct {
	sched.ClaimDone
	view    *projections.Thread // from a snapshot and the replay's chunks, or nil
	snapSeq uint64              // the snapshot's sequence; 0 when none
}

// claim claims th under sess, starting from the thread's snapshot when the
// store keeps them and it verifies. It runs off the actor's goroutine.
func (r *Runner) claim(ctx context.Context, sess events.Session, th, holder string) claimResult {
	c, err := events.AcquireSessionMarker(ctx, r.store, sess, th, holder, r.now())
	if err != nil {
		return claimResult{ClaimDone: sched.ClaimDone{Thread: th, Err: err}}
	}
	// A snapshot is saved when a claim ends: a thread claimed for the first
	// time has none, and its claim costs no read for one.
	var view *projections.Thread
	if c.Prev != 0 {
		view = r.loadSnapshot(ctx, th)
	}
	var from, snapSeq uint64
	if view != nil && view.LastSeq >= c.Seq {
		// A snapshot at or past the new marker cannot be of this log.
		r.stats.snapshotsBad.Add(1)
		r.log.Warn("snapshot ignored: past the claim's marker", "thread", th, "snapshot_seq", view.LastSeq, "claim_seq", c.Seq)
		view = nil
	}
	if view != nil {
		from, snapSeq = view.LastSeq+1, view.LastSeq
	}
	view, from, err = r.replayChunks(c, view, from)
	if err != nil {
		return claimResult{ClaimDone: sched.ClaimDone{Thread: th, Err: err}}
	}
	// Each read of the replay has a call's time of its own: a long log
	// takes more than one, and a claim that always timed out would never
	// end.
	lctx, cancel := context.WithTimeout(r.ctx, r.cfg.CallTimeout)
	defer cancel()
	h, err := events.LoadClaimed(lctx, r.store, c, from)
	if err == nil {
		err = resolveFirstPosts(lctx, r.store, h)
	}
	if err == nil && view == nil {
		// A fork by reference: its runs' history is its source's.
		err = projections.ResolveFirst(lctx, r.store, h)
	}
	return claimResult{ClaimDone: sched.ClaimDone{Thread: th, Claim: c, History: h, Err: err}, view: view, snapSeq: snapSeq}
}

// replayChunk is how many sequences of the log one read of a claim's
// replay covers at most.
var replayChunk uint64 = 16 << 10 // a var for tests (export_test.go)

// replayChunks folds the thread's log from from into view (a fresh one
// when nil), one bounded read at a time, up to the last chunk before the
// claim's marker, and returns the view and where the rest starts. A claim
// with no snapshot of a long thread then holds one compact view and one
// chunk, not the whole log, and each read ends within the store's call
// timeout. A store that cannot read a bounded range replays it at once.
func (r *Runner) replayChunks(c events.Claim, view *projections.Thread, from uint64) (*projections.Thread, uint64, error) {
	if _, ok := r.store.(events.BoundedLoader); !ok {
		return view, from, nil
	}
	from = max(from, 1)
	for from+replayChunk <= c.Seq {
		if err := r.replayChunk(c, &view, from); err != nil {
			return nil, 0, err
		}
		from += replayChunk
	}
	return view, from, nil
}

// replayChunk folds one bounded read of the log, from from on, into *view,
// making the view at the thread's first event: a fork by reference starts
// from its source's history.
func (r *Runner) replayChunk(c events.Claim, view **projections.Thread, from uint64) error {
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.CallTimeout)
	defer cancel()
	envs, err := r.store.(events.BoundedLoader).LoadUpTo(ctx, c.Thread, from, from+replayChunk-1)
	if err == nil {
		err = resolveFirstPosts(ctx, r.store, envs)
	}
	if err == nil && *view == nil && len(envs) > 0 {
		err = projections.ResolveFirst(ctx, r.store, envs)
		*view = projections.New(c.Thread)
	}
	if err != nil {
		return fmt.Errorf("runner: replay %s from %d: %w", c.Thread, from, err)
	}
	for _, env := range envs {
		(*view).Apply(env)
	}
	if *view != nil {
		(*view).Compact()
	}
	return nil
}

// peek reports whether th has work: a message not yet taken, or a run a
// claim would have to abandon. It only reads. It runs off the actor's
// goroutine.
func (r *Runner) peek(ctx context.Context, th string) (bool, error) {
	view := r.loadSnapshot(ctx, th)
	from := uint64(1)
	if view != nil {
		from = view.LastSeq + 1
	} else {
		view = projections.New(th)
	}
	envs, err := r.store.Load(ctx, th, from)
	if err != nil {
		return false, err
	}
	for _, env := range envs {
		view.Apply(env)
	}
	return len(view.Pending()) > 0 || view.ActiveRun != nil, nil
}

// loadSnapshot returns th's fold from its snapshot, or nil when the store
// keeps none, it has none, or it does not verify (reported, never trusted).
func (r *Runner) loadSnapshot(ctx context.Context, th string) *projections.Thread {
	ss, ok := r.store.(events.SnapshotStore)
	if !ok || r.cfg.SnapshotEvery < 0 {
		return nil
	}
	data, err := ss.LoadSnapshot(ctx, th)
	if err != nil || data == nil {
		return nil
	}
	view, err := projections.DecodeSnapshot(th, data)
	if err != nil {
		r.stats.snapshotsBad.Add(1)
		r.log.Warn("snapshot ignored", "thread", th, "err", err)
		return nil
	}
	r.stats.snapshotsLoaded.Add(1)
	return view
}
