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
type postQueue struct {
	q    []events.Envelope
	busy bool // the head is being resolved
}

// firstPostResolved reports the head of the queue, resolved.
type firstPostResolved struct{ env events.Envelope }

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

// resolved takes the resolved head of the queue and goes on.
func (a *threadActor) resolved(ctx actor.Context, env events.Envelope) {
	a.posts.busy = false
	if len(a.posts.q) == 0 || a.posts.q[0].Seq != env.Seq {
		return // the actor is stopping: nothing is fed any more
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
	b := sys.NewBackoff(10*time.Millisecond, time.Second)
	for {
		ctx, cancel := context.WithTimeout(a.ctx, a.env.cfg.CallTimeout)
		err := events.ResolveFirstPost(ctx, a.firstPosts(), &env)
		cancel()
		if err == nil {
			a.send(firstPostResolved{env: env})
			return
		}
		a.log().Warn("could not resolve a post's message id; trying again", "seq", env.Seq, "err", err)
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
