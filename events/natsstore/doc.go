// Package natsstore is the JetStream [events.Store]: one stream holds every
// thread's events, and a KV bucket holds the leases (DESIGN §2).
//
// With Config.Partitions P > 1 there is one stream per partition
// ([PartitionStream]: <stream>-p<p>, subjects <prefix>.<p>.>), each with its
// own leader on a cluster, and every per-thread operation goes to the
// thread's partition's stream; the buckets stay shared. Reads of several
// threads name one partition (see docs/partitions.md).
//
// The fence is JetStream's own expected-sequence check: a fenced append
// carries Nats-Expected-Last-Subject-Sequence with
// Nats-Expected-Last-Subject-Sequence-Subject naming the thread's literal
// claim subject, so the server refuses it atomically once a newer claim
// marker exists, and nothing is written (DESIGN §3). Refusals come back as
// [events.ErrThreadBusy] (fence) or [events.ErrConflict] (compare-and-set).
//
// A guarded consuming append ([events.FencedGuarded]) is, when the store
// guards ([Config.Guard], [GuardMode]), one atomic batch of a guard message
// on <prefix>.T.guard, which expects the run subject's last sequence to be
// the one the writer read, then the fenced event: a writer with runner
// credentials cannot slip a consuming event in between the holder's read
// and its write. A refused guard comes back as [events.ErrRunMoved]. Guard
// messages are no events: every read skips them, and the event after one
// says so ([events.Envelope.GuardBefore]) to readers that watch for gaps.
//
// A publish whose reply is lost has an unknown outcome. Append retries it
// with the same Nats-Msg-Id, and when the retry is refused it reads the
// subject back for that id, because a single-replica stream checks the
// expected sequence before it deduplicates. Only when it still cannot tell
// does it return an error wrapping [events.ErrUnavailable].
//
// [New] creates the stream (DenyDelete, DenyPurge, no rollup, no age, no
// message TTL: the stream is the audit log) and the bucket (per-key TTL), or
// checks them and refuses an unsafe existing stream rather than change it.
//
// Reads that decide correctness go to the stream leader (STREAM.MSG.GET,
// never a direct get that a lagging follower could answer); replays and
// tails use ordered consumers.
//
// Beyond [events.Store], for runners and read models:
//   - [Store.WorkQueue]: a durable consumer on <prefix>.*.posted (one per
//     partition) shared by runners, so that each post wakes one of them
//     (runner.WorkSource);
//   - [Store.Replay] and [Store.LastStreamSeq]: the whole stream, or a
//     filter of it, read up to its last sequence at the call, with large
//     pulls and decoding in a goroutine of its own (the audit's reader);
//   - [Store.OpenDurable]: a durable pull consumer that a read model
//     resumes from, with ack-all and reset to a sequence;
//   - [Store.OpenBucket]: a read model's KV bucket, written by
//     compare-and-set on each key's revision.
//
// The read models' two are [events.ReadModelStore]'s methods, returning
// the port's types: natsstore has no second vocabulary for them.
//
// Every reader decodes with a hand-written fast path for well-formed events
// and falls back to events.Decode for anything else (decode.go).
//
// # Files, by role
//
// Each file has one job:
//   - the store and its setup: store.go (New, Close), config.go, api.go (the
//     JetStream API and KV subjects, in [Config.Domain]), auth.go
//     (connection options, permission errors), errors.go, setup.go (the
//     stream's and the lease bucket's config, created or checked);
//   - append and publish: append.go (Post, Append), publish.go (a checked
//     publish, retried until its outcome is known, with the read-back after
//     an ambiguous outcome);
//   - reads and tails: read.go (Load, LastSeq, Threads, leader gets),
//     direct.go (batched direct gets, LoadUpTo), tail.go, replay.go (the
//     whole stream, for the audit); decode.go decodes what they read;
//   - leases and buckets: lease.go (thread leases), session.go (runner
//     sessions, the lease watch), partition.go (partition leases, in the
//     lease bucket under _partition.<p>), snapshot.go, bucket.go (read
//     models);
//   - consumers: durable.go (a read model's durable), workqueue.go (the
//     runners' shared work queue);
//   - batches: batch.go (atomic batches), guard.go (guarded consuming
//     appends, [GuardMode]).
//
// # Usage
//
//	srv, _ := natsembed.Start(natsembed.Config{DataDir: dir})
//	store, err := natsstore.New(ctx, natsstore.Config{URL: srv.ClientURL()})
//	if err != nil {
//		return err // wraps events.ErrUnavailable when the server is unreachable
//	}
//	defer store.Close()
//	_, err = store.Post(ctx, "T", &eventspb.MessagePosted{MessageId: "m1", Text: "hi"})
//	sess, err := store.OpenSession(ctx, runnerID, 30*time.Second) // renewed every 10s
//	c, history, err := events.AcquireSessionClaim(ctx, store, sess, "T", holder, 0, time.Now())
//	// fold history, decide, then append fenced by the claim:
//	_, err = store.Append(ctx, events.NewRunStarted(c, time.Now(), runID, promptSeq, "echo"), events.Fenced(c))
//	if errors.Is(err, events.ErrThreadBusy) {
//		// a newer claim exists; nothing was written
//	}
package natsstore
