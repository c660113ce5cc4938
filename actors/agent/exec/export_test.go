package exec

import "time"

// SetDoneGrace shortens how long a program may linger after done, so the
// test of a lingering program is quick. It returns a restore func.
func SetDoneGrace(d time.Duration) (restore func()) {
	old := doneGrace
	doneGrace = d
	return func() { doneGrace = old }
}
