// Package memstore is an in-memory [events.Store] with the same fence
// semantics as the JetStream store, for simulation and property tests.
//
// A [Log] plays the stream; each [Store] handle on it plays one process's
// connection, with its own clock (to model skew) and its own injected
// faults (to model lost acks and failed writes). A log deduplicates
// message ids within a window, before its checks as an R3 stream does
// ([Replicated], the default) or after them as an R1 stream does
// ([Single]); see [LogConfig].
//
// A Store also implements [events.ReadModelStore] and
// [events.SnapshotStore]: durable consumers, key-value buckets and
// snapshots live on the Log, shared by its handles as a server's are, and a
// durable's ack wait counts on the log's clock (LogConfig.Now), the
// server's, not the handle's.
//
// # Usage
//
//	log := memstore.NewLog()
//	a := log.Open(memstore.Config{Now: clockA.Now})
//	b := log.Open(memstore.Config{Now: clockB.Now, Fault: faults})
//	c, history, err := events.AcquireClaim(ctx, a, "T", "a/1", time.Second, clockA.Now())
package memstore
