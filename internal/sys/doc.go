// Package sys holds the few process-level helpers the standard library
// lacks and several packages share: [ProcessID], an id that differs between
// processes and reads well in logs, and [Sleep], a sleep that a context
// ends early.
//
// They were two one-function packages (procid, ctxsleep); one small
// package with a plain name reads better at the call site (sys.Sleep,
// sys.ProcessID) and keeps internal/ from filling with packages of one
// function each.
//
// # Usage
//
//	for attempt := 0; ; attempt++ {
//		if err := try(ctx); err == nil {
//			return nil
//		}
//		if !sys.Sleep(ctx, delay) {
//			return ctx.Err()
//		}
//	}
package sys
