// Package audit checks a real log against the spec's invariants
// (spec/ThreadClaimLapse.tla, DESIGN §3 and §5). The stream is the audit log;
// this package reads it back and says whether the fence held.
//
// An [Auditor] takes envelopes in stream order, any mix of threads, and keeps
// only what its checks need per thread, so it runs at close to the speed the
// log can be read. Its checks, named as the spec's invariants:
//
//   - I1_ConsumedAtMostOnce: no message is consumed twice, by any mix of
//     run_started, answer_given and steering_given.
//   - I3_OneActiveRun: no run starts while another is active in its thread.
//   - FenceNewestClaim: every fenced event (run_started, answer_given,
//     steering_given, run_abandoned) has as claim_seq the newest
//     thread_claimed of its thread before it, names that claim's holder, was
//     appended with the fence headers (Nats-Expected-Last-Subject-Sequence =
//     claim_seq, Nats-Expected-Last-Subject-Sequence-Subject =
//     <prefix>.T.claim), and comes before any release of that claim. In a
//     RUNFENCE thread (its first marker on its run subject, spec README
//     "Claims on the run subject") the fence is instead a compare-and-set
//     on the run subject (Nats-Expected-Last-Subject-Sequence = the run
//     subject's previous sequence, no -Subject header or the run subject),
//     and the claim-subject fence is an old-protocol writer's: a violation.
//   - ClaimChain: each thread_claimed and thread_released expects the
//     previous sequence on its thread's claim subject (0 for the first): an
//     unbroken compare-and-set chain. Every message on the claim subject
//     counts, garbage too, as it does for JetStream. A missing header reads
//     as 0, so for the first claim it cannot be told from "0". A marker on
//     the run subject (RUNFENCE) expects the run subject's previous
//     sequence instead; a marker on the other subject than the thread's
//     first marker is a violation (the two protocols share no stream).
//   - NoEndAfterAbandon: no run_output, request_opened, run_completed or
//     run_failed of a run after it was abandoned.
//   - AnswerOnce: no request is answered twice, and no run opens one
//     request id twice.
//   - NoneSkipped: each run_started, answer_given and steering_given
//     consumes the oldest pending message of its thread: messages are
//     consumed in order and none is passed over; one naming no pending
//     message (not posted here, or a repost of a message's id) breaks it
//     too (skip.go).
//   - RunChain: each run_output, request_opened, run_completed and
//     run_failed was appended with a compare-and-set on its thread's run
//     subject (Nats-Expected-Last-Subject-Sequence = the run subject's
//     previous sequence). A run event with no check, such as a
//     run_completed forged by a client that can publish to the run
//     subject, is a violation. In a RUNFENCE thread such an event of a
//     claim that is not the newest marker, or is released, is one too: its
//     writer would have read the newer marker and stopped (I4).
//   - RunByHolder: each run_output, request_opened, run_interrupted,
//     run_completed and run_failed is of the active run, with the claim_seq
//     and holder of its run_started. A run that ends twice, an end or
//     output of a run that never started, or one written by another holder
//     (a holder with no claim marker, claim_seq 0, included) is a
//     violation; such an event changes nothing in the fold either.
//   - ReleaseByHolder: each thread_released releases the newest claim, not
//     yet released, and names its holder (a release that also breaks
//     ClaimChain is reported there once).
//   - GivenToActive: each answer_given answers a request the active run
//     opened, and each steering_given names the active run (either still
//     consumes its message).
//   - AbandonOnlyOlder: each run_abandoned names the active run, started
//     under a claim older than the newest, with that claim as its
//     started_claim_seq; or the run that ended last, with none active (its
//     end beat the abandon). An abandon of a run the newest claim started
//     breaks it: a run_started its holder did not write, or a holder that
//     abandons its own run.
//
// These are the rules of the spec's trace validator too (spec/trace.go,
// artifactr audit --spec): it takes this audit's verdict on each event and
// steps the model besides, so the two flag the same threads. Each check
// is an invariant, property or action guard of the spec, or a check of
// what the model cannot see, as spec/rules.go lists.
//
// What an audit cannot catch: a writer holding runner credentials that
// follows the protocol (claims with a compare-and-set under its own
// holder, fences and checks its writes) makes a log no different from an
// honest runner's. NATS permissions exist for exactly that case: only
// runners may publish to the claim and run subjects (examples/nats).
//
// A stranded thread is a warning, not a violation: with
// Options.StrandedAfter set, the report lists the threads that have had a
// message pending, no active run and no claim (never claimed, or its newest
// claim released) for longer than it. Nothing in the log is wrong, but
// nobody is answering: runners promise to consume a post within
// runner.ConsumeBound.
//
// Anything else wrong with an event is an anomaly, listed apart: an
// undecodable or unknown event, a repeated or out-of-order sequence, or an
// event that contradicts the state, such as an answer to an unknown request,
// or a consumed message that was never posted, or a post no client writes (a
// schema this reader does not know, no message id or an invalid one, a
// claim_seq or holder, an expected-sequence check other than the reject
// strategy's: projections.PostFinding). Anomalies do not fail an audit;
// a malformed event never hides the violations of the events after it. The
// audit folds with projections.Thread's rules (projections.Rules) on a
// compact state of its own, and reports each of their findings as the
// violation of the invariant it breaks, or as an anomaly with the fold's
// reason: it follows the log as the fold does (a run_started always starts
// its run, a consuming event always consumes its message), and its parity
// test with the fold is exact.
//
// # Usage
//
//	a := audit.New()
//	tail, err := store.Tail(ctx, events.Subjects{}.All(), 1)
//	// ... for each envelope up to the stream's last sequence:
//	a.Add(env)
//	r := a.Report()
//	if jsonOut {
//		err = json.NewEncoder(stdout).Encode(r)
//	} else {
//		err = r.WriteText(stdout)
//	}
//	if !r.OK() {
//		os.Exit(1)
//	}
//
// # JSON
//
// [Report] marshals as one object; field names are stable and only ever added:
//
//	{
//	  "ok": false,                  // no violations (anomalies allowed)
//	  "events": 1000000,            // envelopes audited
//	  "threads": 5000,              // distinct thread ids
//	  "first_seq": 1, "last_seq": 1000000,
//	  "violation_count": 1,         // total; "violations" lists at most MaxFindings
//	  "anomaly_count": 1,           // total; "anomalies" lists at most MaxFindings
//	  "violations": [
//	    {"check": "I1_ConsumedAtMostOnce", "thread": "T",
//	     "seqs": [12, 20, 40],        // involved sequences; the last is the violating event
//	     "message": "message 12 was consumed again by answer_given at 40; it was first consumed at 20"}
//	  ],
//	  "anomalies": [
//	    {"thread": "T", "seq": 41, "type": "request_opened",  // "" when unknown
//	     "message": "request \"q1\" was already opened at 30 by the same run"}
//	  ],
//	  "checks": {"I1_ConsumedAtMostOnce": 52000, ...},  // events each check examined
//	  "stranded_count": 1,          // warnings, with Options.StrandedAfter set
//	  "stranded": [                 // absent when none
//	    {"thread": "T", "since": "2026-12-01T17:53:02.5Z", "pending": 1,
//	     "oldest_seq": 19416, "release_seq": 19467}
//	  ]
//	}
//
// "violations" and "anomalies" are [] when empty, never null. The seqs of
// each check are: I1 [message, first consumer, second consumer]; I3
// [active run's start, new start]; FenceNewestClaim [newest claim, (its
// release,) event], or [event] when no claim precedes it; ClaimChain
// [previous claim-subject sequence, event]; NoEndAfterAbandon [abandon,
// event]; AnswerOnce [request_opened, first answer, second answer], or
// [event] for a request id opened again; RunChain [previous run-subject
// sequence, event]; NoneSkipped [the oldest
// pending message, event], or [(the oldest pending message,) event] when
// it names no pending message; RunByHolder [the run's
// start or end, event], or [event] when no run ever started or ended;
// ReleaseByHolder [newest claim, event]; GivenToActive [active run's
// start, event], or [the newest run's end, event] when no run is active
// ([event] before any run); AbandonOnlyOlder
// [active run's start, event], or [event] when no run is active.
package audit
