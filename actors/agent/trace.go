package agent

import "context"

// StderrFunc receives what an agent's program wrote to stderr in one run
// (its last 4 KiB) and the error the run ended with, nil if it completed.
type StderrFunc func(stderr string, err error)

type stderrKey struct{}

// WithStderr returns ctx carrying f: an agent that runs a program (the exec
// agent) calls it once per run, through [ReportStderr], after the program
// was reaped, with what the program wrote to stderr. The runner uses it to
// log agents' stderr.
func WithStderr(ctx context.Context, f StderrFunc) context.Context {
	return context.WithValue(ctx, stderrKey{}, f)
}

// ReportStderr hands an agent's stderr of one run, and the error the run
// ended with, to ctx's [StderrFunc], if any.
func ReportStderr(ctx context.Context, stderr string, err error) {
	if f, ok := ctx.Value(stderrKey{}).(StderrFunc); ok && f != nil {
		f(stderr, err)
	}
}
