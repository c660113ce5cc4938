// Package projections holds the pure folds of artifactr's event log
// (DESIGN §5). [Thread] is the state of one thread: its messages and taken
// cursor, its newest claim marker, its runs and requests, and the
// compare-and-set tokens of its claim and run subjects. The thread actor, the
// CLI and the read models all fold with it, so they agree on what a log means.
//
// [Thread.Apply] is total: it does no I/O, reads no clock, and turns a
// malformed or contradictory event into a recorded [Anomaly], never a panic.
// It is idempotent by sequence, so a redelivered envelope changes nothing,
// and folding a prefix, cloning, then folding the rest gives the same state as
// folding everything. The audit (package projections/audit) checks the
// spec's invariants on real logs with its own, leaner state.
//
// # Usage
//
//	envs, err := store.Load(ctx, "T", 1)
//	if err != nil {
//		return err
//	}
//	t := projections.Fold("T", envs)
//	for _, a := range t.Anomalies {
//		log.Warn("anomaly", "seq", a.Seq, "type", a.Type, "reason", a.Reason)
//	}
//	if m, ok := t.OldestPending(); ok && t.ActiveRun == nil {
//		// plan a run whose prompt is m.Seq; append run_started fenced by
//		// the claim; apply only the acked envelope:
//		t.Apply(acked)
//	}
//
// Keep a snapshot with [Thread.Clone] and fold only the tail after it.
package projections
