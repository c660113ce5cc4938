package runner

// SetReceiveHook sets a function every thread actor calls at the start of
// each Receive, and returns a function that removes it.
func SetReceiveHook(h func(thread string, msg any)) (restore func()) {
	testHookReceive = h
	return func() { testHookReceive = nil }
}
