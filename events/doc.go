// Package events defines artifactr's event log: the protobuf schema
// (eventspb), the codec, the [Store] interface its two implementations share
// (natsstore on JetStream, memstore in memory), the claim protocol and the
// errors callers branch on.
//
// Each thread T has three subjects: threads.T.posted (messages),
// threads.T.claim (claim markers) and threads.T.run (runs). The stream
// sequence of a thread_claimed marker is the claim's fencing token: a write
// that consumes a message is appended with [Fenced], which JetStream checks
// atomically against the last sequence on threads.T.claim. A refused fence
// returns [ErrThreadBusy] and writes nothing. [FencedGuarded] adds the guard:
// the append also expects the last sequence on threads.T.run that the
// writer read, so that no consuming event another writer slipped in after
// that read is written over; a refused guard returns [ErrRunMoved] (with
// [ErrConflict]): read again and decide again. A store that guards keeps
// the guard on threads.T.guard ([KindGuard]), which no reader is handed.
//
// # Partitions
//
// A deployment may split its threads across P streams ([Subjects.Partitions]),
// each with its own leader. Thread T is then in partition [Partition](T, P),
// the FNV-1a 32-bit hash of its id mod P (what nats-server's subject mapping
// {{partition(P,1)}} computes), and its subjects are threads.<p>.T.<kind>.
// P = 1 is the single stream above. A thread's events are all in one
// stream, so its sequences, and the fence, mean what they did; reads of
// more than one thread go partition by partition. See docs/partitions.md.
//
// Runners divide a partitioned stream's partitions through leases of their
// own ([PartitionLeaser]); like every lease they decide liveness only.
//
// # Usage
//
//	sess, err := store.OpenSession(ctx, runnerID, ttl) // renewed every ttl/3
//	c, history, err := events.AcquireSessionClaim(ctx, store, sess, "T", holder, 0, time.Now())
//	if errors.Is(err, events.ErrThreadBusy) {
//		return // another holder works on T
//	}
//	// fold history, decide, then:
//	ack, err := store.Append(ctx, runStarted, events.FencedGuarded(c, lastRunSeq))
//	switch {
//	case errors.Is(err, events.ErrThreadBusy):
//		// a newer claim exists: nothing was written; stop (I4)
//	case errors.Is(err, events.ErrRunMoved):
//		// a run event this holder has not read landed: load, fold, decide again
//	}
//	// run ends carry a compare-and-set on threads.T.run:
//	_, err = store.Append(ctx, runCompleted, events.ExpectLast(lastRunSeq))
//	// give the thread up:
//	err = events.ReleaseClaim(ctx, store, c, "idle", time.Now())
package events
