// Package server is artifactr's composition root: the one place that wires
// a runner to its store, work queue, observers, read model and HTTP API.
// `artifactr serve` and `artifactr demo` run on it, and the chaos harness
// starts its runners through it, so the tests exercise the wiring the
// binary ships rather than a copy.
//
// # What it composes
//
//   - the observer (internal/obs): metrics and turn spans, and with
//     [Config.MetricsAddr] the Prometheus /metrics, /healthz and /readyz;
//   - the work queue, the durable consumer the runners share
//     ([Config.WorkQueue]): each post wakes one runner;
//   - the runner (actors/runner), configured by [Config.Runner];
//   - with [Config.Projector], the thread-summaries projector, which wakes
//     the runner for threads it finds stranded;
//   - with [HTTPConfig.Addr], the HTTP API with the console at /, and the
//     webhooks' follower.
//
// The NATS server and the store are the caller's: [Config.Store] is open
// before Start and closed after Stop or Kill. So are flags, signals,
// printing and credentials.
//
// # Start and stop
//
// [Start] starts the parts in the order above, each after the one it
// needs; on an error it stops what it started and returns a *[StartError]
// naming the step. [Server.Stop] drains the runner first (no new claims;
// runs get Runner.ShutdownGrace, then are cancelled and recorded as
// failed; every claim released), then stops the rest in the reverse order
// of Start. If Stop's context ends first, the drain gives up: the runner
// stops releasing nothing and its leases lapse, which the fence makes
// safe. [Server.Kill] is a crash: nothing is released. Call one of them,
// once.
//
// # Usage
//
//	s, err := server.Start(ctx, server.Config{
//		Store:     store,
//		Runner:    runner.Config{Agent: agent.Echo{}, ClaimTTL: 10 * time.Second},
//		Projector: true,
//	})
//	if err != nil {
//		return err
//	}
//	<-ctx.Done()
//	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.StopTimeout())
//	defer cancel()
//	return s.Stop(sctx)
//
// [Run] does the same in one call.
package server
