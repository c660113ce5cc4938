// Package memstore is an in-memory [events.Store] with the same fence
// semantics as the JetStream store, for simulation and property tests.
//
// A [Log] plays the stream; each [Store] handle on it plays one process's
// connection, with its own clock (to model skew) and its own injected
// faults (to model lost acks and failed writes).
//
// # Usage
//
//	log := memstore.NewLog()
//	a := log.Open(memstore.Config{Now: clockA.Now})
//	b := log.Open(memstore.Config{Now: clockB.Now, Fault: faults})
//	c, history, err := events.AcquireClaim(ctx, a, "T", "a/1", time.Second, clockA.Now())
package memstore
