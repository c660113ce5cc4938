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
// folding everything.
//
// # One set of rules
//
// The fold rules (what is malformed, what consumes a message, run
// transitions, requests and answers) live in one place, [Rules] (rules.go),
// over a [State] interface. [Thread], the audit's compact state (package
// projections/audit) and the thread summaries (projections/summaries) each
// implement State on their own representation and record what the rules
// decide, so the three cannot disagree; their parity tests compare them
// exactly. A new event is one case in [Rules].
//
// # Usage
//
//	envs, err := store.Load(ctx, "T", 1)
//	if err != nil {
//		return err
//	}
//	// A fork by reference names its history: read it from the source.
//	if err := projections.ResolveFirst(ctx, store, envs); err != nil {
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
