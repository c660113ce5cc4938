package runner

import (
	"context"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections"
)

// Observer is told what a runner does, for metrics, traces and logs
// (internal/obs implements it). Its methods are called from the runner's
// goroutines and thread actors at once: they must be safe for concurrent use,
// quick, and never block.
type Observer interface {
	// Claimed is called when a thread actor starts with claim c; takeover
	// says the thread's previous claim was never released.
	Claimed(c events.Claim, takeover bool)
	// ClaimEnded is called once, when the thread actor holding c stopped.
	ClaimEnded(c events.Claim)
	// Appending is called on the thread actor's goroutine just before an
	// append under c goes out. view is the holder's view of the thread then;
	// it must not be retained. The returned func is called with the
	// append's result where the result is seen, whether or not the actor
	// still lives, so every refusal is seen.
	Appending(c events.Claim, ev *eventspb.Event, view *projections.Thread) func(events.Ack, error)
	// RunContext returns the context run runID's agent runs in, from the
	// one the runner made for it.
	RunContext(ctx context.Context, c events.Claim, runID string) context.Context
	// LeaseRenewed is called with the result of each renewal of the
	// runner's session, the one lease a runner renews.
	LeaseRenewed(err error)
}

// SnapshotObserver is an [Observer] that also sees each snapshot saved at
// a release: its size, and the error when the store could not save it.
type SnapshotObserver interface {
	SnapshotSaved(thread string, bytes int, err error)
}

// StartObserver is an [Observer] that also sees what each claim's actor
// started from: the snapshot's sequence (0: none) and the first and last
// sequences of the events loaded after it. Tests use it to tell, when a
// view goes wrong, where it came from.
type StartObserver interface {
	ClaimStarted(c events.Claim, snapshotSeq, firstSeq, lastSeq uint64)
}

// snapshotSaved counts a snapshot's save and tells the observer.
func (r *Runner) snapshotSaved(p *pendingSnapshot, err error) {
	if err != nil {
		r.stats.snapshotsFailed.Add(1)
	}
	if o, ok := r.cfg.Observer.(SnapshotObserver); ok {
		o.SnapshotSaved(p.thread, len(p.data), err)
	}
}

// NopObserver observes nothing. It is the default [Config.Observer].
type NopObserver struct{}

// Claimed implements [Observer].
func (NopObserver) Claimed(events.Claim, bool) {}

// ClaimEnded implements [Observer].
func (NopObserver) ClaimEnded(events.Claim) {}

// Appending implements [Observer].
func (NopObserver) Appending(events.Claim, *eventspb.Event, *projections.Thread) func(events.Ack, error) {
	return nopDone
}

// RunContext implements [Observer].
func (NopObserver) RunContext(ctx context.Context, _ events.Claim, _ string) context.Context {
	return ctx
}

// LeaseRenewed implements [Observer].
func (NopObserver) LeaseRenewed(error) {}

func nopDone(events.Ack, error) {}
