package projections

import (
	"context"
	"fmt"

	"github.com/artifactr/artifactr/events"
)

// ResolveFork gives env, when it is a thread_forked by reference, the
// history it names (env.Fork): the source thread's events up to the source
// sequence, folded (a source that is itself a fork by reference is
// resolved the same way, so a fork of a fork works), in the copied form of
// [ForkBody]. [Thread.Apply] then folds the fork as it folds the copied
// form. Any other envelope is left as it is.
//
// This is the only I/O of a fork's fold, and it is the reader's: Apply
// stays pure. A source sequence that is not an event of the source sets
// env.Fork.Bad, which the fold records as an anomaly. An error is the
// store's: the source could not be read, and env is left unresolved.
//
// The cost is the source's length up to the sequence (and its sources'),
// paid once per fold from the start: a snapshot holds the resolved state.
func ResolveFork(ctx context.Context, l events.Loader, env *events.Envelope) error {
	b := env.Event.GetThreadForked()
	if env.Err != nil || env.Fork != nil || b == nil || !b.GetReference() ||
		ForkBodyError(env.Thread, env.Seq, b) != "" {
		return nil // nothing to resolve, or the fold flags the event itself
	}
	src, at := b.GetSourceThread(), b.GetSourceSeq()
	t, found, err := SourceAt(ctx, l, src, at)
	switch {
	case err != nil:
		return fmt.Errorf("projections: resolve the fork of %s at %d: %w", src, at, err)
	case !found:
		env.Fork = &events.ForkHistory{Bad: fmt.Sprintf("thread_forked names %s at %d, which is not an event of %s", src, at, src)}
	default:
		env.Fork = &events.ForkHistory{Body: ForkBody(t, at)}
	}
	return nil
}

// ResolveFirst resolves envs' first event when it is a fork by reference
// (see [ResolveFork]): envs are a thread's events from its start, and only
// a thread's first event can be a fork that counts (the fold flags any
// other). A later start, such as a tail after a snapshot, resolves nothing
// that matters and costs nothing but the check.
func ResolveFirst(ctx context.Context, l events.Loader, envs []events.Envelope) error {
	if len(envs) == 0 {
		return nil
	}
	return ResolveFork(ctx, l, &envs[0])
}

// SourceAt folds thread src up to seq, resolving its own fork by
// reference: the history a fork of src at seq names. found is false when
// seq is not one of src's events.
//
// When l keeps snapshots ([events.SnapshotStore]) and src's verifies, is
// from before seq and holds its own fork's history, the fold starts there
// and reads only the events after it, up to seq: a fork at a long
// thread's newest events reads little more than the snapshot.
func SourceAt(ctx context.Context, l events.Loader, src string, seq uint64) (t *Thread, found bool, err error) {
	t, from := sourceSnapshot(ctx, l, src, seq), uint64(1)
	if t != nil {
		from = t.LastSeq + 1
	}
	var envs []events.Envelope
	if bl, ok := l.(events.BoundedLoader); ok {
		envs, err = bl.LoadUpTo(ctx, src, from, seq)
	} else {
		envs, err = l.Load(ctx, src, from)
	}
	if err != nil {
		return nil, false, err
	}
	n := len(envs)
	for n > 0 && envs[n-1].Seq > seq {
		n--
	}
	envs = envs[:n]
	if n == 0 || envs[n-1].Seq != seq {
		return nil, false, nil
	}
	if t == nil {
		// Sequences fall strictly along a chain of forks (a fork's source
		// sequence is before its own), so the recursion ends.
		if err := ResolveFirst(ctx, l, envs); err != nil {
			return nil, false, err
		}
		t = New(src)
	}
	for _, env := range envs {
		t.Apply(env)
	}
	return t, true, nil
}

// sourceSnapshot returns src's snapshot when l keeps one that verifies, is
// strictly before seq (so the events read after it must reach seq itself,
// which proves seq is src's) and resolved its fork; else nil.
func sourceSnapshot(ctx context.Context, l events.Loader, src string, seq uint64) *Thread {
	ss, ok := l.(events.SnapshotStore)
	if !ok {
		return nil
	}
	data, err := ss.LoadSnapshot(ctx, src)
	if err != nil || data == nil {
		return nil
	}
	t, err := DecodeSnapshot(src, data)
	if err != nil || t.LastSeq >= seq || (t.Fork != nil && t.Fork.Unresolved) || t.Compacted() {
		return nil // a runner's compact snapshot holds no history to copy
	}
	return t
}

// LogOnly returns l without its snapshots, if it keeps any: [ResolveFork]
// through it reads the source's log alone. The audit resolves forks so: it
// checks the log, and a snapshot is a runner's cache, not the log.
func LogOnly(l events.Loader) events.Loader {
	if bl, ok := l.(boundedLoader); ok {
		return boundedLogOnly{bl}
	}
	return logOnly{l}
}

type boundedLoader interface {
	events.Loader
	events.BoundedLoader
}

type logOnly struct{ events.Loader }

type boundedLogOnly struct{ boundedLoader }
