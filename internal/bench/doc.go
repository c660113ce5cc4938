// Package bench holds the benchmarks `artifactr bench` runs, apart from
// the CLI that parses their flags and prints their results. Each runs on
// an embedded server in a throw-away directory ([StartTemp]), prints its
// text lines to the writer its config names, and returns its figures as a
// struct that --json prints as it is.
//
// # Usage
//
//	res, err := bench.Turns(ctx, bench.TurnsConfig{Threads: 8, Messages: 50,
//		ClaimTTL: 10 * time.Second, Out: os.Stderr})
//
// The benchmarks are [Turns] and [ClosedLoop] (bench turns), [HTTP] with
// its client process [HTTPClient] (bench http), [Long], [Scale] and
// [Audit]. The demo's tour runs on [StartTemp] too.
package bench
