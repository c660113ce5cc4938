package runner

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/artifactr/artifactr/actors/thread"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/sys"
)

// A claim's holder keeps no message id of its thread's past
// (projections.Thread.Compact): the store's first-post index answers
// whether a post's id was posted before (events.FirstPosts). So every
// message_posted with a message id is resolved against the index before
// the core folds it, and the events after it wait, in order, as the core's
// contract wants them.

// postQueue holds the events routed to a thread actor while a post ahead
// of them is being resolved. Empty, and nil, while nothing is.
//
// With a store that can read an entry apart ([events.FirstPostLookup]) a
// post is resolved by one read: a new id's entry is then written off the
// turn's path, and until it is written the actor answers for the id from
// creating.
type postQueue struct {
	q    []events.Envelope
	busy bool // the head is being resolved
	// creating are the new ids whose entries are being written, each with
	// its first post.
	creating map[string]uint64
}

type (
	// firstPostResolved reports the head of the queue, resolved.
	firstPostResolved struct{ env events.Envelope }
	// firstPostMissing reports that the head of the queue, a post, has
	// no entry in the index.
	firstPostMissing struct{ env events.Envelope }
	// firstPostCreated reports the write of a new id's entry: named is
	// what the index now answers for first (0: it cannot say).
	firstPostCreated struct {
		id           string
		first, named uint64
	}
)

// firstPosts returns the store's first-post index, or nil when it has none.
func (a *threadActor) firstPosts() events.FirstPosts {
	idx, _ := a.env.store.(events.FirstPosts)
	return idx
}

// observe feeds env to the core, after the posts ahead of it and after its
// own resolution when it is a post with a message id.
func (a *threadActor) observe(ctx actor.Context, env events.Envelope) {
	if a.firstPosts() == nil || (len(a.posts.q) == 0 && !events.NeedsFirstPost(&env)) {
		a.decide(ctx, thread.Observed{Env: env})
		a.armIdle()
		return
	}
	a.posts.q = append(a.posts.q, env)
	a.flushPosts(ctx)
}

// resolved takes the resolved head of the queue and goes on. A post of an
// id whose entry this actor is writing is a repost of the post it wrote
// the entry for, whatever the index said: an entry a forger wrote first
// cannot answer for it, and the view remembers the id only once the write
// reports (created).
func (a *threadActor) resolved(ctx actor.Context, env events.Envelope) {
	a.posts.busy = false
	if len(a.posts.q) == 0 || a.posts.q[0].Seq != env.Seq {
		return // the actor is stopping: nothing is fed any more
	}
	if first, ok := a.posts.creating[env.Event.GetMessagePosted().GetMessageId()]; ok && first < env.Seq {
		env.FirstPost = first
	}
	a.posts.q = a.posts.q[1:]
	a.decide(ctx, thread.Observed{Env: env})
	a.armIdle()
	a.flushPosts(ctx)
}

// flushPosts feeds the queue's events to the core up to the next post to
// resolve, whose resolution it starts.
func (a *threadActor) flushPosts(ctx actor.Context) {
	for len(a.posts.q) > 0 && !a.posts.busy {
		env := a.posts.q[0]
		if events.NeedsFirstPost(&env) {
			a.posts.busy = true
			a.env.goDo(func() { a.resolveFirstPost(env) })
			return
		}
		a.posts.q = a.posts.q[1:]
		a.decide(ctx, thread.Observed{Env: env})
		a.armIdle()
	}
	if len(a.posts.q) == 0 {
		a.posts.q = nil
	}
}

// resolveFirstPost asks the index about env, retrying until it answers or
// the actor stops, and reports it.
func (a *threadActor) resolveFirstPost(env events.Envelope) {
	look, _ := a.firstPosts().(events.FirstPostLookup)
	id := env.Event.GetMessagePosted().GetMessageId()
	a.retry("resolve a post's message id", env.Seq, func(ctx context.Context) error {
		if look == nil {
			if err := events.ResolveFirstPost(ctx, a.firstPosts(), &env); err != nil {
				return err
			}
			a.send(firstPostResolved{env: env})
			return nil
		}
		first, found, err := look.LookupFirstPost(ctx, env.Thread, id, env.Seq)
		switch {
		case err != nil:
			return err
		case found:
			env.FirstPost = first
			a.send(firstPostResolved{env: env})
		default:
			a.send(firstPostMissing{env: env})
		}
		return nil
	})
}

// missing resolves the head of the queue, a post whose id the index has
// no entry for: its first post is one this actor is writing the entry of,
// or itself, whose entry it starts writing.
func (a *threadActor) missing(ctx actor.Context, env events.Envelope) {
	id := env.Event.GetMessagePosted().GetMessageId()
	if first, ok := a.posts.creating[id]; ok && first <= env.Seq {
		env.FirstPost = first
	} else {
		env.FirstPost = env.Seq
		if a.posts.creating == nil {
			a.posts.creating = make(map[string]uint64)
		}
		a.posts.creating[id] = env.Seq
		idx, th, seq := a.firstPosts(), env.Thread, env.Seq
		a.env.goDo(func() {
			a.retry("write a message id's first-post entry", seq, func(ctx context.Context) error {
				named, err := idx.FirstPost(ctx, th, id, seq)
				if err == nil {
					a.send(firstPostCreated{id: id, first: seq, named: named})
				}
				return err
			})
		})
	}
	a.resolved(ctx, env)
}

// created ends the write of a new id's entry. An entry that names another
// post (a forger wrote it first) cannot answer for the id: the view
// remembers it.
func (a *threadActor) created(ctx actor.Context, m firstPostCreated) {
	if a.posts.creating[m.id] != m.first {
		return
	}
	delete(a.posts.creating, m.id)
	if len(a.posts.creating) == 0 {
		a.posts.creating = nil
	}
	if m.named != m.first {
		a.log().Warn("a message id's first-post entry names another post; the holder remembers the id itself", "msg_id", m.id, "seq", m.first, "entry_says", m.named)
		a.decide(ctx, thread.RememberID{ID: m.id})
	}
}

// retry calls f with a call's time until it returns nil or the actor stops.
func (a *threadActor) retry(what string, seq uint64, f func(context.Context) error) {
	b := sys.NewBackoff(10*time.Millisecond, time.Second)
	for {
		ctx, cancel := context.WithTimeout(a.ctx, a.env.cfg.CallTimeout)
		err := f(ctx)
		cancel()
		if err == nil || a.ctx.Err() != nil {
			return
		}
		a.log().Warn("could not "+what+"; trying again", "seq", seq, "err", err)
		if !b.Wait(a.ctx) {
			return
		}
	}
}

// resolveFirstPosts resolves envs against s's first-post index, when it has
// one: a claim's history, before the core folds it.
func resolveFirstPosts(ctx context.Context, s events.Store, envs []events.Envelope) error {
	idx, ok := s.(events.FirstPosts)
	if !ok {
		return nil
	}
	return events.ResolveFirstPosts(ctx, idx, envs)
}
