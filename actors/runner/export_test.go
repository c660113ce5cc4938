package runner

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// SetReceiveHook sets a function every thread actor calls at the start of
// each Receive, and returns a function that removes it.
func SetReceiveHook(h func(thread string, msg any)) (restore func()) {
	testHookReceive = func(thread string, _ *actor.PID, msg any) { h(thread, msg) }
	return func() { testHookReceive = nil }
}

// SetReplayChunk sets how many sequences one read of a claim's replay
// covers, and returns a function that restores it.
func SetReplayChunk(n uint64) (restore func()) {
	old := replayChunk
	replayChunk = n
	return func() { replayChunk = old }
}

// SetFollowIdle sets how long a follow waits for an event before it checks
// its stream, and returns a function that restores it.
func SetFollowIdle(d time.Duration) (restore func()) {
	old := followIdle
	followIdle = d
	return func() { followIdle = old }
}

// SetCatchUpWait sets how long a core waits for stored events before its
// actor reads them, and returns a function that restores it.
func SetCatchUpWait(d time.Duration) (restore func()) {
	old := catchUpWait
	catchUpWait = d
	return func() { catchUpWait = old }
}
