// Package thread is the pure core of one claim's holder: a [Core] folds what
// happens to the claim (events read from the log, append results, run
// reports, timers) into the thread's view and decides what to do next. It
// does no I/O and reads no clock, like etcd raft's Node: the shell (package
// runner) carries out each [Ready] and reports the results as Inputs.
//
// The core applies an event to its view only when the log holds it
// ([Observed]); an append's ack only moves the point it waits for before it
// plans again. So the view never holds an event the log lacks, and every
// consuming write it plans is fenced by its claim (DESIGN §3).
//
// An append whose outcome is unknown is settled before anything else is
// planned: the core reads the log ([Ready.Sync]), and when the append is
// not there it sends it again, unchanged, with the same message id, until
// the store gives a verdict. A replicated stream may commit the first send
// after that read, and a holder that planned past it could release its
// claim under the run it had started.
//
// # Usage
//
//	core := thread.New(thread.Config{Agent: "echo", IdleTicks: 1}, claim, history)
//	rd := core.Start()
//	for {
//		carry out rd: cancel and start runs, deliver messages, make the append,
//		sync, release and stop, in that order
//		in := next input: Observed, AppendDone, Synced, RunOutput, RunAsked,
//		RunFinished, LeaseLost, Tick, Drain or Shutdown
//		rd, err = core.Decide(in)
//	}
package thread
