// Package runners is a deterministic simulation of runner processes (issue
// 28): each owns a [sched.Scheduler] and, for the threads it holds, thread
// cores (actors/thread), and a simulated shell carries out their Readys as
// actors/runner does, over one memstore log with runner sessions, in one
// goroutine, from one seeded PRNG. The sibling package test/sim drives the
// cores of one thread; this one drives the layer above them, where the
// soak failures of issues 21 to 27 were (a thread left dangling under a
// live session, a half-failed claim that kept its lease, a holder that
// released and died before it claimed again).
//
// # What a seed does
//
// [Run] starts 2 to 4 runners on 1 to 4 threads, with or without a shared
// work queue, and a thread core config (steerable or not, an idle timeout).
// Each step the PRNG picks one enabled action by weight:
//
//   - the client posts, or retries a post whose ack it lost;
//   - a runner's follow routes the next event of the log to its scheduler;
//     its lease watch delivers the next lease or session change;
//   - a runner sends one of its I/O in flight (a peek, a claim with
//     events.AcquireSessionMarker and a load, an ack, an append, a sync, a
//     release with its re-check of posts), perhaps with a lost ack or a
//     failed write, and reports it at once or at a later step;
//   - the work queue hands a post to a runner, or again AckWait after an
//     unacknowledged delivery;
//   - a runner's scheduler timer fires; its session is renewed (perhaps
//     failing); a thread actor's idle timer fires;
//   - an agent reports on a run: output, a request, a steering ask, its end;
//   - a runner freezes (its session lapses on the server's timer once time
//     passes its TTL) or thaws, dies (its writes in flight may still land),
//     or a new one joins;
//   - simulated time passes, never past an alive runner's renewal.
//
// After every step the log's new events are audited (projections/audit:
// I1, I3 and the fence checks) and the simulation checks each message handed
// to an agent: at most once, and only once the log holds its consumption.
//
// Then the faults stop: frozen runners thaw, writes in flight land, posts
// are retried until acknowledged. The runners work, time passing only
// when nothing is left to do at once, until every message is consumed and
// no run is active ([CheckLiveness]); each message consumed after the
// faults stopped must be so within runner.ConsumeBound of the later of that
// moment and its post ([CheckBound]).
//
// # On natsstore
//
// memstore is a fake. So a share of the seeds run the same world, with
// every check above, on natsstore against an embedded nats-server, a
// stream and buckets per seed ([Config.NATS], nats.go), through the
// events.Store methods only. The clock is simulated: natsstore reads it
// (lapses, post stamps), as do the schedulers and cores, and the faults
// strike around the real calls as memstore strikes them. The server's
// TTLs run on its real clock (10 s), which a seed crosses only if the
// machine stalls; so the simulation carries out a session's expiry for
// the server in simulated time (CloseSession at the revision last
// written, TTL after it), which the lease watches see as they see an
// expiry. Everything else is the server's own: compare-and-set on the
// stream and the lease bucket, deduplication, the KV watch. The checker
// loads each thread after a step that wrote, and reads each watch up to a
// barrier lease, so what the server does off the simulation's goroutine
// lands at fixed points. natsstore draws its session ids, which the
// schedulers' ownership hashes over, so a natsstore seed may not replay
// its outcome exactly. A post's time for the bound is its event's (the
// simulated clock), not the fold's Posted (the server's, real, clock).
//
// # The fence layouts
//
// Every other pair of seeds (2, 3, 6, 7, ...: [eventstest.RunFenced]; Config.Layout
// [eventstest.LayoutBySeed], which TestRunners and the random seeds of
// TestRunners_nats use) runs on the RUNFENCE layout (issue 23,
// events.Subjects.RunFence on every handle of the memstore Log,
// natsstore.FenceRun on natsstore): claim markers and releases on the run
// subject, every holder write a compare-and-set on it. The split draws
// nothing from the PRNG, so a seed on the claim layout does what it did
// before; each seed's first trace line names its layout, and
// -runners.fence=claim|run|seed (RUNNERS_FENCE) puts every seed on one.
// The soak seeds and the controls name their layout. The checker also
// requires every marker to be on the layout's subject (CheckLayout).
//
// # The control
//
// TestRunners_unfencedControl runs seeds with the fence switched off
// (eventstest.Unfenced on every runner's handle, [Config.Unfenced]) and
// the audit's fence checks let pass ([Config.Fatal]): within 500 seeds
// one must break I1, I3 or [CheckHandedOutOnce], or a green run proves
// nothing. TestRunners_natsUnfencedControl does the same on natsstore,
// from the first seed that breaks on memstore (seed 163 today, I3).
// TestRunners_runFenceUnfencedControl is the memstore control on the run
// subject's layout (seed 163 too, I3).
//
// # Usage
//
//	go test ./test/sim/runners/ -p 1          # 2000 seeds x 600 steps (200 with -race or -short), random base (logged with -v)
//	go test ./test/sim/runners/ -run '^TestRunners$' -runners.seed=N -v  # replay one seed with its trace
//	go test ./test/sim/runners/ -run '^TestRunners$' -runners.base=N -runners.seeds=5000
//	go test ./test/sim/runners/ -run '^TestRunners_nats$' -runners.nats=200 -v    # 4 fixed + 200 random seeds on natsstore
//	go test ./test/sim/runners/ -run '^TestRunners_nats$' -runners.seed=N -v      # one seed on natsstore
//
// The flags have environment variables for CI: RUNNERS_SEEDS, RUNNERS_STEPS,
// RUNNERS_BASE, RUNNERS_SEED, RUNNERS_NATS (random natsstore seeds: 10 by
// default, 2 with -race or -short; the soak seeds run there too).
//
// A failing seed is replayed with its trace, one line per action, and the
// command that replays it. TestRunners_soakFailures replays the seeds that
// caught the last round's soak failures with their fixes reverted
// (testdata/*.patch, soak_test.go).
package runners
