// Package unfence holds the one switch that lets a store append a consuming
// event without the fence ([events.CheckUnfencedForTest]). It exists to prove
// that the safety tests fail without the fence.
//
// Only packages under events/ can import it, and only the test helpers
// (eventstest) turn it on, so a production binary, which imports none of
// them, can never write unfenced: no flag, environment or config reaches it.
package unfence

import "sync/atomic"

var allowed atomic.Bool

// Allow lets every store in this process accept unfenced consuming
// appends from now on. There is no way back: it is for test processes only.
func Allow() { allowed.Store(true) }

// Allowed reports whether [Allow] was called.
func Allowed() bool { return allowed.Load() }
