package events

import (
	"cmp"
	"context"
	"fmt"
	"sync"

	"github.com/artifactr/artifactr/events/eventspb"
)

// FirstPosts is the index of each (thread, message id)'s first post: the
// store's answer to "was this id posted before?" at a cost that does not
// grow with the thread's history, so that a claim's holder need not keep
// every message id of its thread in memory (projections.Thread.Compact).
//
// An entry is written once and never changed or deleted: the store refuses
// a second write, a delete or a purge of an entry, whoever sends it. It is
// never trusted on its own word either: an entry that names another post
// is checked against the log, which is the truth. A writer with a runner's
// credentials can still create an entry first, naming any sequence; such
// an entry is found out (it names no post of the id, or a later one), and
// the index then answers 0, "cannot say", for that id forever. The caller
// then remembers the id itself, as it did before the index.
type FirstPosts interface {
	// FirstPost returns the first post of id in thread, given seq, a
	// message_posted of thread whose message id is id:
	//
	//   - seq, when seq is the first post of id: the entry is created
	//     naming seq, or named it already;
	//   - an earlier sequence, when the entry names a message_posted of
	//     thread with message id id before seq: seq is a repost;
	//   - 0, when the entry names no such post, or a later one: the index
	//     cannot say, and the caller must decide by what it remembers.
	//
	// Any error leaves the question open, and the caller must not decide.
	FirstPost(ctx context.Context, thread, id string, seq uint64) (uint64, error)
}

// resolveParallel is how many posts [ResolveFirstPosts] asks about at once.
const resolveParallel = 32

// FirstPostLookup is a [FirstPosts] that can also read an entry without
// writing one, and write one apart: a holder then decides on a read, and
// writes the entry of a new id off its turn's path.
type FirstPostLookup interface {
	FirstPosts
	// LookupFirstPost answers as FirstPost does when (thread, id) has an
	// entry; found is false when it has none, and nothing is written.
	LookupFirstPost(ctx context.Context, thread, id string, seq uint64) (first uint64, found bool, err error)
}

// ResolveFirstPosts sets FirstPost on each of envs that is a well-formed
// message_posted with a message id, asking idx. The first post of each id
// among envs is asked about concurrently with the others' (a replay of a
// long thread asks about thousands); a later post of the same id only
// after it, so the index names the earlier. It returns the first error,
// leaving some unresolved.
func ResolveFirstPosts(ctx context.Context, idx FirstPosts, envs []Envelope) error {
	var first, later []int
	seen := make(map[string]bool)
	for i := range envs {
		if !NeedsFirstPost(&envs[i]) {
			continue
		}
		if id := envs[i].Event.GetMessagePosted().GetMessageId(); !seen[id] {
			seen[id] = true
			first = append(first, i)
		} else {
			later = append(later, i)
		}
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs error
		sem  = make(chan struct{}, resolveParallel)
	)
	for _, i := range first {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := ResolveFirstPost(ctx, idx, &envs[i]); err != nil {
				mu.Lock()
				errs = cmp.Or(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if errs != nil {
		return errs
	}
	for _, i := range later {
		if err := ResolveFirstPost(ctx, idx, &envs[i]); err != nil {
			return err
		}
	}
	return nil
}

// ResolveFirstPost sets env.FirstPost when env is a well-formed
// message_posted with a message id (see [NeedsFirstPost]), asking idx.
func ResolveFirstPost(ctx context.Context, idx FirstPosts, env *Envelope) error {
	if !NeedsFirstPost(env) {
		return nil
	}
	id := env.Event.GetMessagePosted().GetMessageId()
	first, err := idx.FirstPost(ctx, env.Thread, id, env.Seq)
	if err != nil {
		return fmt.Errorf("events: the first post of message id %q in %s: %w", id, env.Thread, err)
	}
	if first > env.Seq {
		return fmt.Errorf("events: the first post of message id %q in %s at %d, after its post at %d", id, env.Thread, first, env.Seq)
	}
	env.FirstPost = first
	return nil
}

// LookupFirstPosts sets FirstPost on each of envs that is a post with an id
// whose entry idx has, reading only: what a reader that folds on from a
// runner's compact snapshot needs, since the snapshot keeps no id the index
// answers for (and every such id's entry was written before the snapshot
// was saved). A post with no entry is left unresolved: no post of its id
// came before the snapshot, and the reader's own fold knows those after.
func LookupFirstPosts(ctx context.Context, idx FirstPostLookup, envs []Envelope) error {
	for i := range envs {
		env := &envs[i]
		if !NeedsFirstPost(env) {
			continue
		}
		first, found, err := idx.LookupFirstPost(ctx, env.Thread, env.Event.GetMessagePosted().GetMessageId(), env.Seq)
		if err != nil {
			return fmt.Errorf("events: look up the first post of %s at %d: %w", env.Thread, env.Seq, err)
		}
		if found && first <= env.Seq {
			env.FirstPost = first
		}
	}
	return nil
}

// NeedsFirstPost reports whether env is a well-formed message_posted on its
// thread's posted subject with a message id, and not yet resolved: what
// [ResolveFirstPost] asks the index about.
func NeedsFirstPost(env *Envelope) bool {
	if env.FirstPost != 0 || env.Err != nil || env.Kind != KindPosted || env.Event == nil {
		return false
	}
	b, ok := env.Event.GetBody().(*eventspb.Event_MessagePosted)
	return ok && b.MessagePosted.GetMessageId() != ""
}

// IsFirstPostOf reports whether env, read from the log, is a message_posted
// of thread with message id id: what an index entry naming env.Seq must
// find there to be believed.
func IsFirstPostOf(env *Envelope, thread, id string) bool {
	return env != nil && env.Err == nil && env.Thread == thread && env.Kind == KindPosted &&
		env.Event.GetMessagePosted() != nil && env.Event.GetMessagePosted().GetMessageId() == id
}
