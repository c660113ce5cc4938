// Command artifactr runs and inspects artifactr, an event-sourced actor
// runtime for AI-agent threads on NATS JetStream.
//
//	artifactr serve                      # embedded NATS + a runner with the echo agent
//	artifactr post t1 "hello" --wait     # post, wait for the run, print its output
//	artifactr watch                      # live tail of every thread's events
//	artifactr threads                    # every thread's status
//	artifactr show t1                    # one thread's state
//	artifactr audit                      # replay the log, check the invariants
//	artifactr fork t1 --at 12 t2         # t2 starts with t1's history up to seq 12
//	artifactr projections status         # the thread-summaries read model's lag
//	artifactr projections rebuild        # rebuild the read model from zero
//	artifactr demo                       # a guided tour, no setup
//	artifactr bench turns                # throughput and latency figures
//	artifactr bench audit                # audit rate against the raw read rate
//
// Exit codes, for every command: 0 success, 1 the work failed (an
// unreachable server, a missing stream or thread, a failed run; for audit
// also violations found), 2 usage error.
//
// # JSON shapes
//
// `watch --json` prints one object per line per event:
//
//	{"seq": 12,                          // stream sequence
//	 "subject": "threads.t1.run",
//	 "thread": "t1",
//	 "type": "run_started",              // the Artifactr-Type header
//	 "time": "2026-...Z",                // the server's stored time (RFC 3339)
//	 "event_time": "2026-...Z",          // the writer's clock; omitted when unset
//	 "claim_seq": 7,                     // the writer's fencing token; 0 for posts
//	 "holder": "runner-1/ab12cd",        // "" for posts
//	 "msg_id": "t1:7:1",                 // Nats-Msg-Id
//	 "body": {"run_id": "run-5-7", "prompt_seq": "5", "agent": "echo"},
//	 "error": "..."}                     // only for a malformed event; body is then null
//
// body is the event's oneof body in protobuf's canonical JSON mapping (proto
// field names, every field present; 64-bit integers are strings), the message
// named by type in events/eventspb/events.proto.
//
// `threads --json` prints an array of thread summaries, `show --json` one
// thread state and `audit --json` the audit report (projections/audit); see
// each command's --help. The commands that write print one object each:
//
//	post:        {"thread","seq","message_id","duplicate","run":null}
//	post --wait: the same, with "run":{"run_id","status","output","reason","question","request_id"}
//	fork:        {"thread","source","source_seq","seq","messages","runs","duplicate"}
//	cancel:      {"thread","seq","run_id","request_id"}
//	configure:   {"thread","seq","strategy"}
//	init:        {"url","stream","summaries_bucket","replicas"}
//	version:     {"version","revision","schema","go"}
//	projections status, projections rebuild, bench turns|audit|scale, demo: see their --help
//
// bench turns, bench audit and demo print their text on stderr with --json,
// and the object on stdout. `post --follow --json` streams, as watch does:
// one object per line per event of the run. `serve --json` streams its
// status lines as {"time","msg"} objects, one per line, and --log-format
// json makes its log on stderr JSON lines too.
//
// The NATS URL is --nats, else ARTIFACTR_NATS, else NATS_URL, else
// nats://127.0.0.1:4222. `artifactr completion bash|zsh|fish` prints a
// shell completion script.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(runIO(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
