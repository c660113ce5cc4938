// Package sched is the runner's scheduling core: which threads a runner
// claims, peeks and looks at again, when it acknowledges a wake-up, and
// when it retries. Like thread.Core, it does no I/O and reads no clock:
// [Scheduler.Step] takes an [Input] (what happened, and the time) and
// returns a [Ready] (what to do, as data). The runner actor is the loop
// that feeds it and carries the Readys out; the contract is on [Ready].
//
// The decisions, each a function of this package:
//
//   - want levels: a peek reads a thread and claims it only if it has
//     work; a probe claims and gives up at once if idle; a claim keeps
//     the thread until idle. A stronger want replaces a weaker one
//     (enqueue), and work asked for during a peek follows it (peeked).
//   - ownership: without a work source, a free thread's post, or a
//     lapsed session's thread, falls to one live session by a hash over
//     the live sessions (owns); the others look again two TTLs later
//     (recheck, orphaned).
//   - skipped threads: a post left to another live holder is read once
//     that holder's lease goes (route, threadLeaseChanged).
//   - parked acks: a wake-up is acknowledged once a claim made after it
//     holds the thread, or a read after its holder let go finds nothing
//     (woken, ackRead, lookAfterHolder).
//   - claim retries: a failed claim is tried again after a jittered delay
//     that doubles up to [MaxClaimRetry] (claimFailed); a panicked actor's
//     thread is claimed again after [HandoverDelay] (terminated).
//
// Timers are data: the scheduler keeps them, reports the earliest as
// [Ready.Wake], and fires those due on a [Tick]. Their jitter comes from
// a source seeded by [Config.Seed], so a test or a simulation can fix it.
//
// # Usage
//
//	s := sched.New(sched.Config{ClaimTTL: ttl, MaxClaiming: 64, Seed: seed}, session)
//	for ev := range inputs { // one goroutine owns s
//		rd := s.Step(sched.Input{Now: time.Now(), Event: ev})
//		if rd.Forward { /* pass ev's event to its thread's actor */ }
//		for _, th := range rd.Peeks { go func() { inputs <- peek(th) }() }
//		for _, c := range rd.Claims { go func() { inputs <- claim(c) }() }
//		if rd.Spawn != nil {
//			err := spawn(*rd.Spawn)
//			rd = s.Step(sched.Input{Now: time.Now(), Event: sched.Spawned{Spawn: *rd.Spawn, Err: err}})
//			// ... and carry that Ready out too
//		}
//		go ackAll(rd.Acks)
//		// tell rd.SessionGone's and rd.Drain's actors; arm a timer for
//		// rd.Wake that feeds sched.Tick{}; stop once rd.Done.
//	}
package sched
