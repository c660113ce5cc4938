// An agent's Run is called off the thread actor's goroutine, once per run,
// with a [Turn] bound to that run; its error becomes the run_failed reason.
//
// # Usage
//
//	var a agent.Agent = agent.Echo{}          // or exec.Agent{Path: "python3", Args: ...}
//	out, err := a.Run(ctx, turn)              // ctx is cancelled when the claim is lost
//	if err != nil { /* append run_failed{Reason: err.Error()} */ }
//
// The exec agent, which runs any program per turn, lives in package
// artifactr/actors/agent/exec, apart from these plain types: a package that
// only needs them (the pure core, actors/thread) does not link os/exec.
package agent
