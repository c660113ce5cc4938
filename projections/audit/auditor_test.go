package audit

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/eventgen"
	"github.com/artifactr/artifactr/projections"
)

// run audits envs and returns the report.
func run(envs []events.Envelope) Report {
	a := New()
	for _, env := range envs {
		a.Add(env)
	}
	return a.Report()
}

var poster = eventgen.Writer{Thread: "T"}

// claim appends a correct thread_claimed for holder and returns its writer.
func claim(l *eventgen.Log, holder string) eventgen.Writer {
	w := eventgen.Writer{Thread: "T", Holder: holder}
	w.ClaimSeq = l.CAS(w.Claimed(1)).Seq
	return w
}

// A clean log: posts, a claim, a run with output, a request answered,
// steering, completion; a second run abandoned after a takeover; a third
// run under the new claim; a release; then another claim. Every check
// examines some events and none fails.
func TestAuditor_Add_cleanLog(t *testing.T) {
	l := eventgen.NewLog()
	m1 := l.Post(poster.Post("a", "hi")).Seq
	a := claim(l, "A")
	l.Fenced(a.Started("r1", m1))
	l.CAS(a.Output("r1", "thinking"))
	l.CAS(a.Opened("r1", "q1"))
	m2 := l.Post(poster.Post("b", "answer")).Seq
	l.Fenced(a.Answer("r1", "q1", m2))
	m3 := l.Post(poster.Post("c", "steer")).Seq
	l.Fenced(a.Steer("r1", m3))
	l.CAS(a.Completed("r1"))
	m4 := l.Post(poster.Post("d", "again")).Seq
	l.Fenced(a.Started("r2", m4))
	l.CAS(a.Opened("r2", "q2"))
	b := claim(l, "B") // A's lease lapsed; B takes over
	l.Fenced(b.Abandoned("r2", a.ClaimSeq))
	m5 := l.Post(poster.Post("e", "next")).Seq
	l.Fenced(b.Started("r3", m5))
	l.CAS(b.Failed("r3"))
	l.CAS(b.Released())
	c := claim(l, "C")
	l.Post(eventgen.Writer{Thread: "U"}.Post("u", "other thread"))
	l.CAS(c.Released())

	r := run(l.Envs)
	if !r.OK() || r.AnomalyCount != 0 {
		t.Fatalf("report not clean: %+v", r)
	}
	if r.Events != len(l.Envs) || r.Threads != 2 || r.FirstSeq != 1 || r.LastSeq != l.Seq() {
		t.Errorf("Events %d, Threads %d, seqs %d..%d; want %d, 2, 1..%d", r.Events, r.Threads, r.FirstSeq, r.LastSeq, len(l.Envs), l.Seq())
	}
	want := map[string]int{CheckI1: 5, CheckI3: 3, CheckFence: 6, CheckClaimChain: 5, CheckNoEndAfterAbandon: 5, CheckAnswerOnce: 1, CheckRunChain: 5, CheckRejectOnlyIdle: 6,
		CheckNoneSkipped: 5, CheckRunByHolder: 5, CheckReleaseByHolder: 2, CheckGivenToActive: 2, CheckAbandonOnlyOlder: 1}
	if !reflect.DeepEqual(r.Checks, want) {
		t.Errorf("Checks = %v, want %v", r.Checks, want)
	}
}

type wantViolation struct {
	check string
	seqs  []uint64
}

// Each planted violation is detected by its check, with its seqs. The
// envelopes are forged the way a buggy writer would append them.
func TestAuditor_Add_violations(t *testing.T) {
	tests := []struct {
		name  string
		build func(l *eventgen.Log)
		want  []wantViolation
	}{{
		name: "I1_promptTwice",
		build: func(l *eventgen.Log) {
			m := l.Post(poster.Post("a", "x")).Seq // 1
			a := claim(l, "A")                     // 2
			l.Fenced(a.Started("r1", m))           // 3
			l.CAS(a.Completed("r1"))               // 4
			l.Fenced(a.Started("r2", m))           // 5
		},
		want: []wantViolation{{CheckI1, []uint64{1, 3, 5}}},
	}, {
		name: "I1_steeringOfAnAnswer",
		build: func(l *eventgen.Log) {
			m1 := l.Post(poster.Post("a", "x")).Seq // 1
			a := claim(l, "A")                      // 2
			l.Fenced(a.Started("r1", m1))           // 3
			l.CAS(a.Opened("r1", "q1"))             // 4
			m2 := l.Post(poster.Post("b", "y")).Seq // 5
			l.Fenced(a.Answer("r1", "q1", m2))      // 6
			l.Fenced(a.Steer("r1", m2))             // 7
		},
		want: []wantViolation{{CheckI1, []uint64{5, 6, 7}}},
	}, {
		name: "I3_startWhileActive",
		build: func(l *eventgen.Log) {
			m1 := l.Post(poster.Post("a", "x")).Seq // 1
			m2 := l.Post(poster.Post("b", "y")).Seq // 2
			a := claim(l, "A")                      // 3
			l.Fenced(a.Started("r1", m1))           // 4
			l.Fenced(a.Started("r2", m2))           // 5
		},
		want: []wantViolation{{CheckI3, []uint64{4, 5}}},
	}, {
		name: "NoneSkipped_promptPassesAnOlderMessage",
		build: func(l *eventgen.Log) {
			l.Post(poster.Post("a", "x"))           // 1
			m2 := l.Post(poster.Post("b", "y")).Seq // 2
			a := claim(l, "A")                      // 3
			l.Fenced(a.Started("r1", m2))           // 4: 1 is pending
		},
		want: []wantViolation{{CheckNoneSkipped, []uint64{1, 4}}},
	}, {
		// The message passed over stays pending, so taking it next is no
		// violation, and taking the one after is in order (issue 23's
		// stranding: the cursor ends the consumed prefix).
		name: "NoneSkipped_passedOverIsTakenNext",
		build: func(l *eventgen.Log) {
			m1 := l.Post(poster.Post("a", "x")).Seq // 1
			m2 := l.Post(poster.Post("b", "y")).Seq // 2
			m3 := l.Post(poster.Post("c", "z")).Seq // 3
			a := claim(l, "A")                      // 4
			l.Fenced(a.Started("r1", m2))           // 5: 1 is pending
			l.CAS(a.Completed("r1"))                // 6
			l.Fenced(a.Started("r2", m1))           // 7: the oldest pending
			l.CAS(a.Completed("r2"))                // 8
			l.Fenced(a.Started("r3", m3))           // 9: the oldest pending
		},
		want: []wantViolation{{CheckNoneSkipped, []uint64{1, 5}}},
	}, {
		name: "NoneSkipped_steeringPassesAnOlderMessage",
		build: func(l *eventgen.Log) {
			m1 := l.Post(poster.Post("a", "x")).Seq // 1
			a := claim(l, "A")                      // 2
			l.Fenced(a.Started("r1", m1))           // 3
			l.Post(poster.Post("b", "y"))           // 4
			m3 := l.Post(poster.Post("c", "z")).Seq // 5
			l.Fenced(a.Steer("r1", m3))             // 6: 4 is pending
		},
		want: []wantViolation{{CheckNoneSkipped, []uint64{4, 6}}},
	}, {
		// ADR-0069's trace without the fence: A's claim lapses before its
		// run_started lands; B claims, sees no run, and starts the same
		// prompt. A's start is refused by the fence in production; here
		// it landed unfenced.
		name: "adr0069_lapseWithoutFence",
		build: func(l *eventgen.Log) {
			m := l.Post(poster.Post("a", "x")).Seq                                       // 1
			a := claim(l, "A")                                                           // 2
			b := claim(l, "B")                                                           // 3
			l.Event(a.Started("rA", m), events.Check{Mode: events.CheckUnfencedForTest}) // 4
			l.Fenced(b.Started("rB", m))                                                 // 5
		},
		want: []wantViolation{
			{CheckFence, []uint64{3, 4}},
			{CheckI3, []uint64{4, 5}},
			{CheckI1, []uint64{1, 4, 5}},
		},
	}, {
		name: "Fence_staleClaimSeq",
		build: func(l *eventgen.Log) {
			m := l.Post(poster.Post("a", "x")).Seq // 1
			a := claim(l, "A")                     // 2
			claim(l, "B")                          // 3
			l.Fenced(a.Started("r1", m))           // 4: fence 2, but 3 is newest
		},
		want: []wantViolation{{CheckFence, []uint64{3, 4}}},
	}, {
		name: "Fence_noClaim",
		build: func(l *eventgen.Log) {
			m := l.Post(poster.Post("a", "x")).Seq // 1
			w := eventgen.Writer{Thread: "T", Holder: "A", ClaimSeq: 1}
			l.Fenced(w.Started("r1", m)) // 2
		},
		want: []wantViolation{{CheckFence, []uint64{2}}},
	}, {
		name: "Fence_afterRelease",
		build: func(l *eventgen.Log) {
			m := l.Post(poster.Post("a", "x")).Seq // 1
			a := claim(l, "A")                     // 2
			l.CAS(a.Released())                    // 3
			l.Fenced(a.Started("r1", m))           // 4
		},
		want: []wantViolation{{CheckFence, []uint64{2, 3, 4}}},
	}, {
		name: "Fence_otherHolder",
		build: func(l *eventgen.Log) {
			m := l.Post(poster.Post("a", "x")).Seq // 1
			a := claim(l, "A")                     // 2
			a.Holder = "Mallory"
			l.Fenced(a.Started("r1", m)) // 3
		},
		want: []wantViolation{{CheckFence, []uint64{2, 3}}},
	}, {
		name: "Fence_missingHeaders",
		build: func(l *eventgen.Log) {
			m := l.Post(poster.Post("a", "x")).Seq                                       // 1
			a := claim(l, "A")                                                           // 2
			l.Event(a.Started("r1", m), events.Check{Mode: events.CheckUnfencedForTest}) // 3
			l.Event(a.Steer("r1", m+10), events.ExpectLast(a.ClaimSeq))                  // 4: on the run subject, a message not posted
		},
		want: []wantViolation{{CheckFence, []uint64{2, 3}}, {CheckFence, []uint64{2, 4}}, {CheckNoneSkipped, []uint64{4}}},
	}, {
		name: "Fence_abandon",
		build: func(l *eventgen.Log) {
			m := l.Post(poster.Post("a", "x")).Seq  // 1
			a := claim(l, "A")                      // 2
			l.Fenced(a.Started("r1", m))            // 3
			l.Fenced(a.Abandoned("r1", a.ClaimSeq)) // 4: A abandons its own run: AbandonOnlyOlder (issue 27)
			b := eventgen.Writer{Thread: "T", Holder: "B", ClaimSeq: 2}
			l.Fenced(b.Abandoned("r1", 2)) // 5: B never claimed, and r1 is not active
		},
		want: []wantViolation{{CheckAbandonOnlyOlder, []uint64{3, 4}}, {CheckFence, []uint64{2, 5}}, {CheckAbandonOnlyOlder, []uint64{3, 5}}},
	}, {
		name: "ClaimChain_sameC0",
		build: func(l *eventgen.Log) {
			a := eventgen.Writer{Thread: "T", Holder: "A"}
			b := eventgen.Writer{Thread: "T", Holder: "B"}
			l.Event(a.Claimed(1), events.ExpectLast(0)) // 1
			l.Event(b.Claimed(2), events.ExpectLast(0)) // 2: both read c0 = 0
		},
		want: []wantViolation{{CheckClaimChain, []uint64{1, 2}}},
	}, {
		name: "ClaimChain_noCheck",
		build: func(l *eventgen.Log) {
			a := claim(l, "A")                    // 1
			l.Event(a.Released(), events.Check{}) // 2: no expected sequence
			b := eventgen.Writer{Thread: "T", Holder: "B"}
			l.Event(b.Claimed(2), events.ExpectLast(2)) // 3: fine
		},
		want: []wantViolation{{CheckClaimChain, []uint64{1, 2}}},
	}, {
		name: "ClaimChain_garbageCounts",
		build: func(l *eventgen.Log) {
			claim(l, "A")                                                                     // 1
			l.Raw("threads.T.claim", eventgen.Header(events.TypeThreadClaimed), []byte{0xff}) // 2
			b := eventgen.Writer{Thread: "T", Holder: "B"}
			l.Event(b.Claimed(2), events.ExpectLast(1)) // 3: JetStream would refuse: 2 is last
		},
		want: []wantViolation{{CheckClaimChain, []uint64{2, 3}}},
	}, {
		name: "NoEndAfterAbandon",
		build: func(l *eventgen.Log) {
			m := l.Post(poster.Post("a", "x")).Seq // 1
			a := claim(l, "A")                     // 2
			l.Fenced(a.Started("r1", m))           // 3
			b := claim(l, "B")                     // 4
			l.Fenced(b.Abandoned("r1", 2))         // 5
			l.CAS(a.Output("r1", "late"))          // 6
			l.CAS(a.Opened("r1", "q1"))            // 7
			l.CAS(a.Completed("r1"))               // 8
			l.CAS(a.Failed("r1"))                  // 9
		},
		want: []wantViolation{
			{CheckNoEndAfterAbandon, []uint64{5, 6}},
			{CheckNoEndAfterAbandon, []uint64{5, 7}},
			{CheckNoEndAfterAbandon, []uint64{5, 8}},
			{CheckNoEndAfterAbandon, []uint64{5, 9}},
		},
	}, {
		// Issue 10's first forgery: a run_completed published straight to
		// threads.T.run with no check headers, for the active run. Every
		// other check passes: only the missing compare-and-set shows it.
		name: "RunChain_forgedCompletedNoCheck",
		build: func(l *eventgen.Log) {
			m := l.Post(poster.Post("a", "x")).Seq        // 1
			a := claim(l, "A")                            // 2
			l.Fenced(a.Started("r1", m))                  // 3
			l.Event(a.Completed("r1"), events.Check{})    // 4: forged
			l.CAS(a.Output("r1", "too late, not active")) // 5: fine as a CAS, but after the run's end
		},
		want: []wantViolation{{CheckRunChain, []uint64{3, 4}}, {CheckRunByHolder, []uint64{4, 5}}},
	}, {
		// Issue 23's forgeries with runner credentials and valid headers.
		// A second end of the active run: the forger's, then the holder's.
		name: "RunByHolder_endsTwice",
		build: func(l *eventgen.Log) {
			m := l.Post(poster.Post("a", "x")).Seq // 1
			a := claim(l, "A")                     // 2
			l.Fenced(a.Started("r1", m))           // 3
			l.CAS(a.Completed("r1"))               // 4: forged, as the holder
			l.CAS(a.Completed("r1"))               // 5: the holder's own
		},
		want: []wantViolation{{CheckRunByHolder, []uint64{4, 5}}},
	}, {
		name: "RunByHolder_endByAnotherHolder",
		build: func(l *eventgen.Log) {
			m := l.Post(poster.Post("a", "x")).Seq // 1
			a := claim(l, "A")                     // 2
			l.Fenced(a.Started("r1", m))           // 3
			f := a
			f.Holder = "F"
			l.CAS(f.Completed("r1")) // 4: A's claim_seq, another holder
			l.CAS(a.Output("r1", "o"))
		},
		want: []wantViolation{{CheckRunByHolder, []uint64{3, 4}}},
	}, {
		name: "RunByHolder_noClaimMarker",
		build: func(l *eventgen.Log) {
			m := l.Post(poster.Post("a", "x")).Seq // 1
			a := claim(l, "A")                     // 2
			l.Fenced(a.Started("r1", m))           // 3
			f := eventgen.Writer{Thread: "T", Holder: "F"}
			l.CAS(f.Completed("r1")) // 4: claim_seq 0
			l.CAS(f.Output("r1", "o"))
			l.CAS(a.Completed("r1")) // 6: the holder's own end stands
		},
		want: []wantViolation{{CheckRunByHolder, []uint64{3, 4}}, {CheckRunByHolder, []uint64{3, 5}}},
	}, {
		name: "RunByHolder_forgedClaimThenEndOfRunNeverStarted",
		build: func(l *eventgen.Log) {
			l.Post(poster.Post("a", "x")) // 1
			f := claim(l, "F")            // 2: forged, a valid compare-and-set
			l.CAS(f.Output("r9", "o"))    // 3
			l.CAS(f.Completed("r9"))      // 4
		},
		// The first run-subject event cannot be a compare-and-set on it.
		want: []wantViolation{{CheckRunChain, []uint64{3}}, {CheckRunByHolder, []uint64{3}}, {CheckRunByHolder, []uint64{4}}},
	}, {
		name: "ReleaseByHolder_noClaimMarker",
		build: func(l *eventgen.Log) {
			a := claim(l, "A") // 1
			f := a
			f.ClaimSeq, f.Holder = 0, "F"
			l.CAS(f.Released()) // 2: a valid compare-and-set, naming no claim
			l.CAS(a.Released()) // 3: A's own
		},
		want: []wantViolation{{CheckReleaseByHolder, []uint64{1, 2}}},
	}, {
		name: "RunChain_eachUncheckedRunEvent",
		build: func(l *eventgen.Log) {
			m := l.Post(poster.Post("a", "x")).Seq        // 1
			a := claim(l, "A")                            // 2
			l.Fenced(a.Started("r1", m))                  // 3
			l.Event(a.Output("r1", "o"), events.Check{})  // 4
			l.Event(a.Opened("r1", "q1"), events.Check{}) // 5
			l.Event(a.Failed("r1"), events.Check{})       // 6
		},
		want: []wantViolation{
			{CheckRunChain, []uint64{3, 4}},
			{CheckRunChain, []uint64{4, 5}},
			{CheckRunChain, []uint64{5, 6}},
		},
	}, {
		// A check on another subject than the run subject is not a
		// compare-and-set on the run: it would land whatever the run did.
		name: "RunChain_checkOnAnotherSubject",
		build: func(l *eventgen.Log) {
			m := l.Post(poster.Post("a", "x")).Seq // 1
			a := claim(l, "A")                     // 2
			l.Fenced(a.Started("r1", m))           // 3
			ev := a.Completed("r1")
			data, h, err := events.Encode(ev)
			if err != nil {
				panic(err)
			}
			h[events.HeaderExpectSeq] = []string{"2"}
			h[events.HeaderExpectSubj] = []string{"threads.T.claim"}
			l.Raw("threads.T.run", h, data) // 4: a fence, not a CAS on the run
		},
		want: []wantViolation{{CheckRunChain, []uint64{3, 4}}},
	}, {
		// Issue 10's second forgery: run_started with no headers, naming
		// the current holder's claim_seq, for an already consumed message.
		name: "Forgery_runStartedNoHeaders_consumed",
		build: func(l *eventgen.Log) {
			m := l.Post(poster.Post("a", "x")).Seq      // 1
			a := claim(l, "A")                          // 2
			l.Fenced(a.Started("r1", m))                // 3
			l.CAS(a.Completed("r1"))                    // 4
			l.Event(a.Started("r2", m), events.Check{}) // 5: forged
		},
		want: []wantViolation{{CheckFence, []uint64{2, 5}}, {CheckI1, []uint64{1, 3, 5}}},
	}, {
		// Issue 10's third forgery: the same for the pending message while
		// a run is active.
		name: "Forgery_runStartedNoHeaders_whileActive",
		build: func(l *eventgen.Log) {
			m1 := l.Post(poster.Post("a", "x")).Seq      // 1
			a := claim(l, "A")                           // 2
			l.Fenced(a.Started("r1", m1))                // 3
			m2 := l.Post(poster.Post("b", "y")).Seq      // 4
			l.Event(a.Started("r2", m2), events.Check{}) // 5: forged
		},
		want: []wantViolation{{CheckFence, []uint64{2, 5}}, {CheckI3, []uint64{3, 5}}},
	}, {
		name: "AnswerOnce",
		build: func(l *eventgen.Log) {
			m1 := l.Post(poster.Post("a", "x")).Seq // 1
			a := claim(l, "A")                      // 2
			l.Fenced(a.Started("r1", m1))           // 3
			l.CAS(a.Opened("r1", "q1"))             // 4
			m2 := l.Post(poster.Post("b", "y")).Seq // 5
			m3 := l.Post(poster.Post("c", "z")).Seq // 6
			l.Fenced(a.Answer("r1", "q1", m2))      // 7
			l.Fenced(a.Answer("r1", "q1", m3))      // 8
		},
		want: []wantViolation{{CheckAnswerOnce, []uint64{4, 7, 8}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := eventgen.NewLog()
			tt.build(l)
			r := run(l.Envs)
			var got []wantViolation
			for _, v := range r.Violations {
				got = append(got, wantViolation{v.Check, v.Seqs})
				if v.Thread != "T" || v.Message == "" || strings.Contains(v.Message, "\n") {
					t.Errorf("violation %+v: want thread T and a one-line message", v)
				}
			}
			if !reflect.DeepEqual(got, tt.want) || r.OK() || r.ViolationCount != len(tt.want) {
				t.Errorf("violations = %+v\nwant %+v", r.Violations, tt.want)
			}
		})
	}
}

// A garbage payload is an anomaly, and the violations after it are still
// found, in its thread and others.
func TestAuditor_Add_garbageDoesNotHideViolations(t *testing.T) {
	l := eventgen.NewLog()
	m := l.Post(poster.Post("a", "x")).Seq                                                     // 1
	a := claim(l, "A")                                                                         // 2
	l.Raw("threads.T.run", eventgen.Header(events.TypeRunStarted), []byte("\xff\xff garbage")) // 3
	l.Raw("threads.T", eventgen.Header(events.TypeRunStarted), nil)                            // 4: no kind
	l.Fenced(a.Started("r1", m))                                                               // 5
	l.CAS(a.Completed("r1"))                                                                   // 6
	l.Fenced(a.Started("r2", m))                                                               // 7
	r := run(l.Envs)
	if len(r.Anomalies) != 2 || r.Anomalies[0].Seq != 3 || r.Anomalies[1].Seq != 4 || r.Anomalies[1].Thread != "" {
		t.Errorf("anomalies = %+v; want seqs 3 (thread T) and 4 (no thread)", r.Anomalies)
	}
	if len(r.Violations) != 1 || r.Violations[0].Check != CheckI1 || !reflect.DeepEqual(r.Violations[0].Seqs, []uint64{1, 5, 7}) {
		t.Errorf("violations = %+v; want I1 at 1,5,7", r.Violations)
	}
}

// Events that contradict the state without breaking a check are anomalies;
// a consuming event naming no posted message and a request id opened
// twice break NoneSkipped and AnswerOnce (issue 27: one rule set with the
// trace validator).
func TestAuditor_Add_anomalies(t *testing.T) {
	l := eventgen.NewLog()
	m1 := l.Post(poster.Post("a", "x")).Seq // 1
	m2 := l.Post(poster.Post("b", "y")).Seq // 2
	a := claim(l, "A")                      // 3
	l.Fenced(a.Started("r1", m1))           // 4
	l.Fenced(a.Answer("r1", "q9", m2))      // 5: no such request: GivenToActive
	l.CAS(a.Output("r1", "fine"))           // 6
	l.Fenced(a.Steer("r1", 99))             // 7: no such message: NoneSkipped
	l.CAS(a.Opened("r1", "q1"))             // 8
	l.CAS(a.Opened("r1", "q1"))             // 9: duplicate: AnswerOnce
	l.CAS(a.Released())                     // 10: fine
	l.Repeat(0)                             // seq 1 again
	r := run(l.Envs)
	want := []struct {
		seq uint64
		msg string
	}{
		{1, "sequence 1 does not follow 10"},
	}
	checks := []string{}
	for _, v := range r.Violations {
		checks = append(checks, v.Check)
	}
	if len(r.Anomalies) != len(want) || !slices.Equal(checks, []string{CheckGivenToActive, CheckNoneSkipped, CheckAnswerOnce}) {
		t.Fatalf("anomalies = %+v, violations %+v", r.Anomalies, r.Violations)
	}
	for i, w := range want {
		if got := r.Anomalies[i]; got.Seq != w.seq || got.Thread != "T" || !strings.Contains(got.Message, w.msg) {
			t.Errorf("anomaly %d = %+v, want seq %d with %q", i, got, w.seq, w.msg)
		}
	}
}

// A prefix other than the default names another claim subject.
func TestAuditor_Add_subjectPrefix(t *testing.T) {
	l := eventgen.NewLog()
	l.Subjects = events.Subjects{Prefix: "art"}
	m := l.Post(poster.Post("a", "x")).Seq
	a := claim(l, "A")
	l.Fenced(a.Started("r1", m))
	na := NewWithOptions(Options{Subjects: l.Subjects})
	for _, env := range l.Envs {
		na.Add(env)
	}
	if r := na.Report(); !r.OK() || r.AnomalyCount != 0 {
		t.Errorf("report = %+v, want clean", r)
	}
	if r := run(l.Envs); r.OK() { // default prefix: every subject is foreign
		t.Errorf("default-prefix audit of art.* found nothing: %+v", r)
	}
}

func TestAuditor_Report_maxFindings(t *testing.T) {
	l := eventgen.NewLog()
	for range 5 {
		l.Raw("threads.T.run", nil, []byte{0xff})
	}
	a := NewWithOptions(Options{MaxFindings: 2})
	for _, env := range l.Envs {
		a.Add(env)
	}
	r := a.Report()
	if len(r.Anomalies) != 2 || r.AnomalyCount != 5 {
		t.Errorf("%d anomalies listed, count %d; want 2, 5", len(r.Anomalies), r.AnomalyCount)
	}
}

// A lapsed holder's run end lands after the new claim but before the new
// claimant's abandon, which it planned while the run was still active.
// Both the audit and the fold take the abandon as a no-op.
func TestAuditor_Add_abandonAfterOwnEnd(t *testing.T) {
	l := eventgen.NewLog()
	m1 := l.Post(poster.Post("a", "hi")).Seq
	a := claim(l, "A")
	l.Fenced(a.Started("r1", m1))
	b := claim(l, "B")
	l.CAS(a.Completed("r1"))
	l.Fenced(b.Abandoned("r1", a.ClaimSeq))
	r := run(l.Envs)
	if !r.OK() || r.AnomalyCount != 0 {
		t.Fatalf("report: %d violations %d anomalies: %+v %+v", r.ViolationCount, r.AnomalyCount, r.Violations, r.Anomalies)
	}
	v := projections.Fold("T", l.Envs)
	if len(v.Anomalies) != 0 || v.Runs[0].Status != projections.RunCompleted {
		t.Fatalf("fold: anomalies %+v, run status %s", v.Anomalies, v.Runs[0].Status)
	}
	// An abandon naming another run breaks AbandonOnlyOlder: the spec's
	// Abandon abandons the active run (issue 27: one rule set with the
	// trace validator).
	l.Fenced(b.Abandoned("r9", a.ClaimSeq))
	if r := run(l.Envs); r.ViolationCount != 1 || r.Violations[0].Check != CheckAbandonOnlyOlder || r.AnomalyCount != 0 {
		t.Fatalf("abandon of an unknown run: %+v %+v, want one AbandonOnlyOlder violation", r.Violations, r.Anomalies)
	}
}

// Issue 23: a forged end of the active run, valid in every header, is
// told only by the holder's writes for the run after it. A steering it
// gives its run then names the end that left no run active, so that the
// finding leads to the forged event.
func TestAuditor_Add_givenAfterEndNamesTheEnd(t *testing.T) {
	l := eventgen.NewLog()
	m1 := l.Post(poster.Post("a", "x")).Seq // 1
	a := claim(l, "A")                      // 2
	l.Fenced(a.Started("r1", m1))           // 3
	l.CAS(a.Completed("r1"))                // 4: the forged end
	m2 := l.Post(poster.Post("b", "y")).Seq // 5
	l.Fenced(a.Steer("r1", m2))             // 6: the holder steers its run
	r := run(l.Envs)
	if len(r.Violations) != 1 || r.Violations[0].Check != CheckGivenToActive || !reflect.DeepEqual(r.Violations[0].Seqs, []uint64{4, 6}) {
		t.Errorf("violations = %+v; want GivenToActive at 4,6", r.Violations)
	}
}
