// Package runner is the protoactor shell around the pure thread core: a
// [Runner] finds threads with work, claims them, and hosts one thread actor
// per claim, which feeds everything that happens to its claim to
// thread.Core and carries out the Readys it returns.
//
// What a runner pays does not grow with the threads it holds, beyond their
// memory (DESIGN §9):
//
//   - one follow of the whole stream (an ordered consumer) whose events the
//     runner actor routes to the actor holding each thread; the stream has no
//     holes in its sequences, so a jump is a gap, and the follow starts again
//     after the last event routed;
//   - one session key, renewed every ClaimTTL/3, that every claim of the
//     runner lives by; a runner that dies or freezes past the TTL lapses all
//     its claims at once;
//   - one watch of the lease bucket, through which it learns which sessions
//     lapsed and claims their threads (a probe gives a thread up at once if
//     it has nothing to do): no sweep over every thread.
//
// A post to a thread that no live runner holds wakes one runner: the one a
// shared work source (natsstore's WorkQueue) hands it to, which acknowledges
// it once a claim that read the post holds the thread (a wake-up that came
// while a claim was in flight waits for the next read), so the post goes to
// another runner if that one dies first. [ConsumeBound] is the promise that
// follows. Without a work source, the post falls to one runner
// by a hash of the thread over the live sessions, and the others look at
// the thread again two TTLs later in case that runner died before it
// claimed. Either way each post costs one claim, not one per runner.
//
// Which threads to claim, peek or look at again, and when to acknowledge a
// wake-up or retry, is decided by a pure core, [sched.Scheduler]: the
// runner actor feeds it what happens (events routed, wake-ups, claims and
// peeks done, actors stopped, lease and session changes, timers due) and
// carries out the Ready it returns. The scheduler owns the session claims
// are made under and whether the runner drains; storage I/O (claim, peek,
// snapshot loads) lives in storage.go, and its timers run on one re-armed
// time.Timer.
//
// With partitions (P > 1), the runners divide them (issue 29): the runner
// actor runs an owner.Core next to its scheduler, fed the live sessions
// from the lease watch, and follows, pulls the work queue of
// (natsstore's WorkQueue.OpenPartition) and claims the threads of only
// the partitions it owns (sched.Config.Owns). A partition it hands over is
// drained (sched.Disowned: its threads' actors release their claims)
// before its lease is released; a partition it takes is followed from new
// events, and the threads ever posted to in it are looked at, so work a
// drained or dead owner left is found. Stop hands every partition over
// first. So each event is delivered to one runner, whatever their number.
// With P = 1 nothing of this runs: every runner follows the one stream.
//
// A claimed idle thread costs its actor, its core's view and one idle timer.
// A claim loads the thread's events up to its marker only; events after it
// reach the actor through the follow, and those routed while the claim was
// in flight are kept for it.
//
// The view keeps no message id of the thread's past: every message_posted
// with an id is first resolved against the store's first-post index
// (events.FirstPosts) — a claim's history at once, concurrently, and the
// events routed to the actor in order, those behind a post waiting for its
// answer (firstpost.go). So the held memory does not grow with the
// thread's messages; only an id whose index entry a forger wrote first is
// remembered, in the view and its snapshots.
//
// A thread actor that panics is stopped, never restarted on its stale state;
// the runner releases its claim and claims the thread again.
//
// # Usage
//
//	r, err := runner.New(runner.Config{
//		Store:    store,                 // natsstore or memstore
//		Agent:    agent.Echo{},          // or an exec agent
//		ClaimTTL: 10 * time.Second,      // the session's TTL
//		Work:     workQueue,             // shared by the runners
//	})
//	if err != nil { ... }
//	if err := r.Start(ctx); err != nil { ... }
//	...
//	err = r.Stop(ctx) // drain: runs finish or are failed, claims released
package runner
