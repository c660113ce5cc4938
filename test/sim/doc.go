// Package sim is a deterministic simulation of runners contending for a
// thread (STYLE §6.5, after TigerBeetle's VOPR and FoundationDB's
// BUGGIFY). It drives the pure thread cores (actors/thread), not the
// protoactor shell, against one in-memory log (events/memstore), in one
// goroutine, from one seeded PRNG, and checks the log with the audit
// (projections/audit) after every step.
//
// # What a seed does
//
// [Run] makes 2 to 4 processes, each with its own store handle on the one
// [memstore.Log], its own skewed clock and its own fault hook, and a thread
// core config (steerable or not, idle release or not). The log checks
// before it deduplicates on odd seeds, as a single-server (R1) stream
// does, and deduplicates first on even seeds, as a replicated (R3) one
// does ([ModeOf]), so any run of seeds covers both. Each step the PRNG
// picks one enabled action, by weight:
//
//   - a client posts a message, or reposts one with the same message id
//     (an unacknowledged retry, or a plain duplicate);
//   - an idle process claims the thread with events.AcquireClaim, by its
//     own clock, perhaps with a failed lease write, a failed marker or a
//     lost ack on the marker;
//   - a process carries out the oldest I/O its core asked for (an append,
//     a sync, a release), perhaps with a lost ack (memstore.LoseAck: it
//     landed, the caller is told it may not have) or a failed write
//     (memstore.FailBefore);
//   - a process feeds its core the oldest I/O result (AppendDone, Synced);
//   - a process is delivered the next event after its own cursor
//     (Observed), so views lag one another; or an old event again;
//   - the agent reports on one of a process's runs: output, a request,
//     completion or failure (cancelled runs fail);
//   - a process ticks, or renews its lease (a lost lease stops its core);
//   - a process crashes: its core, runs and queued results are gone; its
//     queued writes are dropped or, as if already sent, still land later
//     as zombies; it may claim again;
//   - leases lapse: every clock jumps past the TTL, or one process's clock
//     does (skew), so it takes a lease its holder still counts as live;
//   - a clock drifts a little.
//
// Ready work is queued per process (out, inbox, Observed cursor), so
// effects are delayed and interleaved with every other process's.
//
// After every step the checker loads the log's new events and feeds them
// to one audit.Auditor (a stream checker, so this is the verdict of
// auditing the whole log after every step) and to a projections.Thread.
// Every audit check must hold (I1_ConsumedAtMostOnce, I3_OneActiveRun,
// FenceNewestClaim, ClaimChain, NoEndAfterAbandon, AnswerOnce), and the
// simulation's own: a message is handed to an agent at most once
// ([CheckHandedOutOnce]) and only after the log holds the event that
// consumed it ([CheckHandOutAfterLog]); a repost returns the original
// sequence ([CheckPostIdempotent]); Decide refuses nothing the shell may
// send ([CheckDecide]).
//
// Then the drain: faults stop, zombie writes land or are refused, every
// process crashes, every post is retried until acknowledged, and one
// process claims the thread and works until nothing is pending, its runs
// completing. When its core releases idle threads, one more post then lands
// after its load and before its idle release (issue 21's race): the
// release's re-check must see it and the drainer claim again. Every posted
// message must have been consumed, exactly once with I1, and no run may be
// active ([CheckDrain]); each consumed within runner.ConsumeBound of the
// end of the faults or its post, on the drainer's clock ([CheckBound]);
// the whole log is audited again from scratch and must agree
// ([CheckReplay]).
//
// # The fence layouts
//
// Every other pair of seeds (2, 3, 6, 7, ...: [eventstest.RunFenced]; Config.Layout
// [eventstest.LayoutBySeed], which TestSim uses) runs on the RUNFENCE layout (issue
// 23, events.Subjects.RunFence; natsstore.FenceRun on natsstore): claim
// markers and releases on the run subject, every holder write a
// compare-and-set on it (the core's FencedGuarded with its K), a release
// ReleaseClaimAt the core's K. The split draws nothing from the PRNG, so a
// seed on the claim layout does what it did before the split; each seed's
// first trace line names its layout, and -sim.fence=claim|run|seed
// (SIM_FENCE) puts every seed on one. The checker also requires every
// marker to be on the layout's subject (CheckLayout).
//
// # The control
//
// A safety check that cannot fail proves nothing. TestSim_unfencedControl
// runs the same simulation with every handle wrapped in
// eventstest.Unfenced, which switches the fence off, and requires that
// some seed of a fixed range breaks I1_ConsumedAtMostOnce or
// I3_OneActiveRun (FenceNewestClaim alone does not count: it fails at the
// first unfenced write whatever happens next). It prints the first such
// seed with its trace. TestSim_runFenceUnfencedControl does the same on
// the run subject's layout, where dropping the consuming writes' check
// (the other writes keep their compare-and-set) must break them too.
//
// # On natsstore
//
// memstore is a fake; the read-back that settles an ambiguous append lives
// in natsstore. So a share of the seeds run the same world, with every
// check above, on natsstore against one embedded nats-server per test
// binary, a stream and buckets per seed ([Config.NATS], nats.go). The
// faults strike around the store and inside its publish retry loop
// (natsstore.WrapSend), where another process's write or takeover may land
// before the retry; the simulation knows when a write landed with its ack
// lost, and checks that natsstore never reports it refused
// ([CheckSettled]). TestSim_nats runs random seeds, TestSim_natsReadBack
// fixed ones and requires every way of settling to occur, and
// TestSim_natsUnfencedControl is the control. A natsstore seed replays
// exactly unless the real server times out on a stalled machine.
//
// # Usage
//
// From the repository root:
//
//	go test ./test/sim/                       # 2000 seeds x 300 steps, random base seed (logged with -v)
//	go test ./test/sim/ -v -run '^TestSim$' -sim.seeds=100000 -sim.steps=1000 -timeout=0   # longer
//	go test ./test/sim/ -v -run '^TestSim$' -sim.base=12345    # the seeds 12345.. again
//	go test ./test/sim/ -v -run '^TestSim$' -sim.seed=12345    # replay one seed, printing its trace
//	go test ./test/sim/ -v -run '^TestSim_unfencedControl$' -sim.seed=4   # one seed without the fence
//	go test ./test/sim/ -v -run '^TestSim_nats$' -sim.nats=200             # 200 seeds on natsstore
//	go test ./test/sim/ -v -run '^TestSim_nats$' -sim.seed=12345           # replay one on natsstore
//
// The flags have environment variables for CI: SIM_SEEDS, SIM_STEPS,
// SIM_BASE, SIM_SEED, SIM_CONTROL (the control's seed range 1..N), SIM_NATS
// (seeds on natsstore, default 30). With -race or -short the defaults drop
// to 100 seeds, a control range of 50 and 2 natsstore seeds. Seeds run in
// parallel shards, one per GOMAXPROCS.
//
// A failing seed stops the run and is replayed with its trace: one line
// per action, naming holders (p2/3 is process 2's third claim attempt),
// event types and log sequences, then the check that broke, and the exact
// command that replays it. A seed replays exactly: the PRNG is math/rand/v2
// PCG seeded with it, clocks are simulated, and nothing reads the wall
// clock or iterates a map to decide (TestSim_deterministic checks one).
//
// In code:
//
//	r := sim.Run(seed, sim.Config{Steps: 300, Trace: true})
//	if r.Failed() {
//		fmt.Printf("%s: %s\n%s", r.Check, r.Failure, r.FormatTrace())
//	}
package sim
