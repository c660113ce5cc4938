package runner

import "github.com/asynkron/protoactor-go/actor"

// SetReceiveHook sets a function every thread actor calls at the start of
// each Receive, and returns a function that removes it.
func SetReceiveHook(h func(thread string, msg any)) (restore func()) {
	testHookReceive = func(thread string, _ *actor.PID, msg any) { h(thread, msg) }
	return func() { testHookReceive = nil }
}
