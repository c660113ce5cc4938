// Package summaries is the thread-summaries read model (DESIGN §5): for each
// thread, its status (idle, active, waiting), newest claim (holder, claim
// seq, released), active run and its open requests, backlog of pending
// messages, counts and last activity, kept in a KV bucket
// (thread_summaries by default) as JSON under the thread's id. Any NATS
// client can read it:
//
//	nats kv get thread_summaries T
//	nats kv get thread_summaries _meta.checkpoint
//
// The package has a pure core and a JetStream shell. [Apply] folds one
// envelope into a [Summary]: pure, total and idempotent by sequence, and in
// agreement with projections.Thread ([FromThread]). A [Projector] feeds the
// bucket from a durable consumer on every event. It depends on the store's
// port, [events.ReadModelStore], which natsstore implements; it imports
// neither natsstore nor nats.go.
//
// # The loop
//
// A projector owns the read model through the [Checkpoint] key, a lease it
// renews with every checkpoint write. Owning it, it resets the durable
// consumer to the event after the checkpoint, then repeats:
//
//  1. fetch a batch of events (up to Config.Batch);
//  2. keep the deliveries that continue the sequence from the last applied
//     event; skip older ones (redeliveries); stop at a gap (a lost
//     delivery, which would come back out of order) and reset the consumer
//     after the last applied event;
//  3. apply each event to its thread's summary, read from the bucket on
//     first use and cached; an event at or below a summary's LastSeq is
//     skipped, so a redelivery never applies twice;
//  4. write each touched summary once, by compare-and-set on its revision;
//     a refused write is resolved by reading the stored summary, which is
//     always the fold of a prefix of its thread's events, and applying the
//     batch's later events to it;
//  5. write the checkpoint, the batch's last sequence, by compare-and-set:
//     a refusal means another projector took over, and this one stops;
//  6. ack the batch.
//
// A crash anywhere is safe. Before step 5, the next session redoes the
// batch and skips what step 4 stored; after it, the next session starts
// past the batch whatever was acked. The checkpoint, not the consumer's ack
// floor, is where a session resumes, so catching up after downtime, a
// restart with the same owner name, and a takeover are one code path.
//
// # One projector per read model
//
// `artifactr serve` runs a projector next to its runner, so several serves
// on one NATS run several. Only one is active: the checkpoint's owner.
// The others stand by and take over within a third of Config.LeaseTTL once
// the owner releases it (a graceful stop) or its lease lapses (a crash).
// They do not share the durable consumer's deliveries: the fold needs
// every event of a thread in order, and a consumer shared by several
// readers hands each a part. What makes a late write of a former owner
// harmless is the compare-and-set on each summary, the sequence check in
// Apply, and the checkpoint write that fences it out.
//
// # Partitions
//
// With a partitioned layout each partition's stream has its own sequences,
// so each partition has its own projector ([NewProjectors], Config.Partition):
// its own checkpoint key ([CheckpointKeyOf]), lease and epoch in the one
// bucket, and a durable consumer of the same name on its partition's
// stream. A thread lives in one partition, so its summary has one writer's
// epoch. [Read] reads every partition's checkpoint and tail; [ReadLags]
// has each partition's lag and [ReadLag] the one furthest behind.
//
// # Stranded threads
//
// With Config.StrandedAfter set (serve passes runner.ConsumeBound), the
// active projector also watches for threads nobody works on: a message
// pending, no active run and no claim ([Summary.Unclaimed]). It keeps only
// those threads, as the events it applies anyway make them so or not, plus
// the ones a scan of the stored summaries finds when its session starts;
// so its cost follows the few unclaimed threads, not all of them. One still
// unclaimed past the bound is logged as a warning and handed to
// Config.Stranded (serve counts it and its runner claims the thread).
//
// # Rebuild
//
// [Rebuild] (`artifactr projections rebuild`) starts a new epoch at
// checkpoint 0, deletes the durable consumer, purges the summaries and
// replays the stream from its first event. Summaries are stored with their
// epoch; one of an older epoch counts as absent, so a write from a projector
// that did not yet know about the rebuild is ignored, then overwritten.
//
// # Reading
//
// [Read] (`artifactr threads`) returns every summary exact as of the
// stream's last sequence: it reads the checkpoint, scans the bucket, then
// folds the events after the checkpoint itself. [ReadLag] (`artifactr
// projections status`) reports the stream's last sequence, the checkpoint,
// their difference, and the consumer's pending counts.
//
// # Usage
//
//	p, err := summaries.NewProjector(summaries.Config{Store: store, Logger: log})
//	if err != nil {
//		return err
//	}
//	go p.Run(ctx) // until ctx ends; stands by while another projector owns the model
//
//	lag, err := p.Lag(ctx)           // lag.Behind: events not yet applied
//	snap, err := summaries.Read(ctx, store, summaries.DefaultBucket)
//	if errors.Is(err, summaries.ErrNoReadModel) {
//		// no projector ran yet: fold the stream instead
//	}
//	for _, s := range snap.Summaries {
//		fmt.Println(s.Thread, s.Status, s.Holder, s.Pending)
//	}
//
//	// the pure core:
//	s := summaries.Empty("T")
//	for _, env := range envs {
//		s = summaries.Apply(s, env)
//	}
package summaries
