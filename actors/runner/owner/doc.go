// Package owner is the runner's partition ownership core (issue 29): which
// of a partitioned stream's P partitions a runner owns, follows and claims
// the threads of, as Kafka's consumer groups and temporal's shard
// ownership (service/history/shard/ownership.go) divide theirs. Like
// sched, it does no I/O and reads no clock: [Core.Step] takes an [Input]
// (what happened, and the time) and returns a [Ready] (what to do, as
// data); the contract is on [Ready].
//
// It is a package of its own, not a part of sched, because it decides per
// partition over leases of its own (events.PartitionLeaser), while sched
// decides per thread over the thread leases: the runner feeds both from
// one loop, and sched asks it only whether a thread's partition is this
// runner's ([Core.Claims]).
//
// # The rules
//
//   - assignment: every runner computes [Assign] over the live sessions it
//     knows (its own included): rendezvous hashing with a capacity, so
//     each runner gets ⌊P/R⌋ or ⌈P/R⌉ partitions, and a join or a leave
//     moves few of them. Runners that see the same sessions agree without
//     talking; runners that do not yet are safe all the same (below).
//   - acquire: a partition that falls to this runner and whose lease, as
//     last read, is free, lapsed, or its own session's, is acquired by
//     compare-and-set. One refused waits for the next read (every TTL/3).
//   - renew: every lease held is renewed every TTL/3. A renewal refused
//     (another took it), or an expiry passed without one (the runner
//     stalled), loses the partition.
//   - hand over: a partition that no longer falls to this runner (a join,
//     its session lost, a leave) or that it lost is drained: the runner
//     claims none of its threads any more and gives up each claim held
//     there, the way a lapsed session's threads are taken over, through
//     the same fenced claims. Only then is the lease released, so the new
//     owner finds the threads' leases free.
//   - lapse: a runner that freezes stops renewing; the others drop its
//     session from their assignment once the lease watch says it lapsed,
//     and take its partitions once their leases lapse (TTL). When it
//     thaws, its leases have expired by its own clock: it drains at once.
//
// Safety never rests on ownership. Two runners may both believe they own a
// partition (a thawed runner before its first step, clocks that disagree,
// views of the sessions that differ for a moment): each consuming write
// carries its thread's claim fence (DESIGN §3), so the one whose claim is
// older is refused. Ownership decides only liveness and load.
//
// # Usage
//
// The runner actor's loop owns a Core next to its sched.Scheduler, and
// feeds it what its lease watch and its lease calls report:
//
//	oc := owner.New(owner.Config{Partitions: P, TTL: ttl})
//	do(oc.Step(owner.Input{Now: time.Now(), Event: owner.SessionOpened{ID: sess.ID}}))
//	for ev := range inputs { // one goroutine owns oc and the scheduler
//		switch ev := ev.(type) {
//		case events.LeaseUpdate: // a session key changed: Members is the whole live set
//			do(oc.Step(owner.Input{Now: time.Now(), Event: owner.Members{Live: liveSessions(ev)}}))
//		case owner.Event: // Acquired, Renewed, Released, Leases, Drained, Tick
//			do(oc.Step(owner.Input{Now: time.Now(), Event: ev}))
//		}
//	}
//
//	func do(rd owner.Ready) {
//		if rd.Read { go func() { ls, err := store.PartitionLeases(ctx, P); inputs <- owner.Leases{ls, err} }() }
//		for _, p := range rd.Acquire { go func() { l, err := store.AcquirePartition(ctx, p, sess.ID, name, ttl); inputs <- owner.Acquired{p, l, err} }() }
//		for _, l := range rd.Renew { go func() { nl, err := store.RenewPartition(ctx, l); inputs <- owner.Renewed{l.Partition, nl, err} }() }
//		for _, l := range rd.Release { go func() { inputs <- owner.Released{l.Partition, store.ReleasePartition(ctx, l)} }() }
//		for _, p := range rd.Follow { follow(p) }     // replay partition p's stream, then tail it, into sched
//		for _, p := range rd.Drain { drain(p) }       // sched: claim nothing of p; its actors release; then inputs <- owner.Drained{p}
//		for _, p := range rd.Unfollow { unfollow(p) }
//		// arm a timer for rd.Wake that feeds owner.Tick{}; stop once rd.Done after owner.Leave{}.
//	}
//
// How the runner wires it in (actors/runner, owned.go), with P > 1:
//
//   - Its loop owns a Core next to its sched.Scheduler, opened with the
//     runner's session (owner.SessionOpened, and SessionLost when sched
//     gets one), and feeds it the live set of sessions from the lease
//     watch it already has (the updates with Thread "", and the first set
//     at CaughtUp).
//   - Follow: one consumer per owned partition on that partition's
//     stream, from the first sequence whose work may be pending (the
//     partition's consumed checkpoint, or its start), routing into sched
//     as the one follow does today; Unfollow stops it. The shared work
//     queue, if any, is read per partition the same way.
//   - sched takes an ownership hook, Config.Owns func(thread string) bool
//     = oc.Claims(events.Partition(thread, P)), in place of its hash over
//     the live sessions (owns): route, woken, orphaned and rechecked claim
//     a thread only when the hook says so, and leave it alone otherwise
//     (its partition's owner follows it). A lapsed session's thread is
//     then taken by the owner of its partition, not by hash.
//   - Drain(p) becomes a sched input, DrainPartition{P}: sched claims
//     nothing of p any more, drops its queued claims and parked wake-ups
//     of p (unacknowledged: they go to p's next owner), and returns the
//     actors of p's threads in Ready.Drain, as its Drain does for all of
//     them. Once the last of them terminated (or none was held), the loop
//     feeds owner.Drained{P}; the actors released their claims, so the
//     next owner finds the threads' leases free.
//   - On SessionLost the core drains everything (sched already tells the
//     actors SessionGone); the partition leases, which name the lost
//     session, are released once drained, and the runner takes its share
//     again under its new session.
//   - A graceful stop feeds owner.Leave before sched's Drain, and closes
//     the session only once the core's Ready says Done.
//
// test/sim/partitions drives Cores with their shells over memstore: runners
// join, leave, freeze and thaw while posts flood a million thread ids, and
// it checks I1, I3 and exactly-once on the log, and that ownership settles
// one live owner per partition, balanced.
package owner
