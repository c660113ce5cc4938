package audit

import (
	"slices"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/eventgen"
)

// rfLog builds logs of the RUNFENCE layout by hand, as decode would read
// them: claim markers and releases on the thread's run subject, every holder
// write a compare-and-set on it (spec README, "The protocol an
// implementation must follow"). eventgen's Log decodes, and decode refuses
// markers on the run subject until the store learns the layout.
type rfLog struct {
	subj events.Subjects
	envs []events.Envelope
	seq  uint64
	last map[events.Kind]uint64 // thread T's subjects
}

func newRFLog() *rfLog { return &rfLog{last: make(map[events.Kind]uint64)} }

// add appends ev to kind's subject with the expected-sequence check
// (expect, on expectSubj; 0 and "" for none).
func (l *rfLog) add(ev *eventspb.Event, kind events.Kind, expect uint64, expectSubj string) events.Envelope {
	l.seq++
	env := events.Envelope{
		Seq: l.seq, Subject: l.subj.Thread(ev.GetThread(), kind), Thread: ev.GetThread(), Kind: kind,
		Type: events.TypeOf(ev), Stored: eventgen.Stored(l.seq), ExpectSeq: expect, ExpectSubject: expectSubj, Event: ev,
	}
	l.last[kind] = l.seq
	l.envs = append(l.envs, env)
	return env
}

func (l *rfLog) post(ev *eventspb.Event) uint64 { return l.add(ev, events.KindPosted, 0, "").Seq }

// cas appends ev on the run subject expecting its last sequence: an honest
// holder's write, a marker included.
func (l *rfLog) cas(ev *eventspb.Event) uint64 {
	return l.add(ev, events.KindRun, l.last[events.KindRun], "").Seq
}

// casAt appends ev on the run subject expecting k: JetStream would refuse it
// unless k is the last; a log claiming it landed is what the audit flags.
func (l *rfLog) casAt(ev *eventspb.Event, k uint64) uint64 {
	return l.add(ev, events.KindRun, k, "").Seq
}

// claim appends holder's marker on the run subject and returns its writer.
func (l *rfLog) claim(holder string) eventgen.Writer {
	w := eventgen.Writer{Thread: "T", Holder: holder}
	w.ClaimSeq = l.cas(w.Claimed(1))
	return w
}

// honestRunFence is a clean RUNFENCE log: a claim, a run with output and a
// request answered, completion, a release; then a second claim by another
// holder over a run of the first left active, which it abandons, and a run
// of its own.
func honestRunFence() *rfLog {
	l := newRFLog()
	m1 := l.post(poster.Post("a", "hi")) // 1
	a := l.claim("A")                    // 2
	l.cas(a.Started("r1", m1))           // 3
	l.cas(a.Output("r1", "thinking"))    // 4
	l.cas(a.Opened("r1", "q1"))          // 5
	m2 := l.post(poster.Post("b", "x"))  // 6
	l.cas(a.Answer("r1", "q1", m2))      // 7
	l.cas(a.Completed("r1"))             // 8
	l.cas(a.Released())                  // 9
	m3 := l.post(poster.Post("c", "y"))  // 10
	a = l.claim("A")                     // 11
	l.cas(a.Started("r2", m3))           // 12
	b := l.claim("B")                    // 13: A's lease lapsed
	l.cas(b.Abandoned("r2", a.ClaimSeq)) // 14
	m4 := l.post(poster.Post("d", "z"))  // 15
	l.cas(b.Started("r3", m4))           // 16
	l.cas(b.Output("r3", "out"))         // 17
	l.cas(b.Completed("r3"))             // 18
	return l
}

// Spec: ClaimChain, FenceNewestClaim, RunChain under RUNFENCE. An honest
// log of the run-subject layout is clean, and the folds agree on it.
func TestAuditor_Add_runFenceCleanLog(t *testing.T) {
	l := honestRunFence()
	r := run(l.envs)
	if !r.OK() || r.AnomalyCount != 0 {
		t.Fatalf("report not clean: %+v", r)
	}
	if r.Checks[CheckClaimChain] != 4 || r.Checks[CheckFence] != 5 || r.Checks[CheckRunChain] != 5 {
		t.Errorf("Checks = %v, want ClaimChain 4, FenceNewestClaim 5, RunChain 5", r.Checks)
	}
	checkAgreesWithFold(t, l.envs)
}

// Each way a RUNFENCE log can break the protocol is flagged by its check,
// with its seqs.
func TestAuditor_Add_runFenceViolations(t *testing.T) {
	claimSubj := events.Subjects{}.Thread("T", events.KindClaim)
	tests := []struct {
		name  string
		build func(l *rfLog)
		want  []wantViolation
	}{{
		// A holder whose K is stale (it missed its own output's ack): the
		// server refuses the write; a log claiming it landed is flagged.
		name: "staleRunSeq",
		build: func(l *rfLog) {
			m1 := l.post(poster.Post("a", "x")) // 1
			a := l.claim("A")                   // 2
			l.cas(a.Started("r1", m1))          // 3
			l.cas(a.Output("r1", "o"))          // 4
			m2 := l.post(poster.Post("b", "y")) // 5
			l.casAt(a.Steer("r1", m2), 3)       // 6: K is 4
		},
		want: []wantViolation{{CheckFence, []uint64{2, 6}}},
	}, {
		// A stale holder (A) writes after B's marker with a CAS that names
		// the run subject's last sequence: its claim_seq is not the newest.
		name: "claimSeqNotNewest",
		build: func(l *rfLog) {
			m1 := l.post(poster.Post("a", "x")) // 1
			a := l.claim("A")                   // 2
			l.claim("B")                        // 3
			l.cas(a.Started("r1", m1))          // 4
		},
		want: []wantViolation{{CheckFence, []uint64{3, 4}}},
	}, {
		// An old-protocol writer in a run-fenced thread: the claim-subject
		// fence does not see markers on the run subject.
		name: "claimSubjectFence",
		build: func(l *rfLog) {
			m1 := l.post(poster.Post("a", "x"))                      // 1
			a := l.claim("A")                                        // 2
			l.add(a.Started("r1", m1), events.KindRun, 2, claimSubj) // 3
		},
		want: []wantViolation{{CheckFence, []uint64{2, 3}}},
	}, {
		// A marker whose CAS is not the run subject's last sequence.
		name: "markerNotRunPrev",
		build: func(l *rfLog) {
			m1 := l.post(poster.Post("a", "x")) // 1
			a := l.claim("A")                   // 2
			l.cas(a.Started("r1", m1))          // 3
			w := eventgen.Writer{Thread: "T", Holder: "B"}
			l.casAt(w.Claimed(1), 2) // 4: read before the start
		},
		want: []wantViolation{{CheckClaimChain, []uint64{3, 4}}},
	}, {
		// A marker on the run subject checked against the claim subject.
		name: "markerClaimSubjectCheck",
		build: func(l *rfLog) {
			w := eventgen.Writer{Thread: "T", Holder: "A"}
			l.add(w.Claimed(1), events.KindRun, 0, claimSubj) // 1
		},
		want: []wantViolation{{CheckClaimChain, []uint64{1}}},
	}, {
		// A release by a stale claim, whose CAS names the run subject's
		// last sequence: its holder's claim is not the newest.
		name: "staleRelease",
		build: func(l *rfLog) {
			a := l.claim("A")   // 1
			l.claim("B")        // 2
			l.cas(a.Released()) // 3
		},
		want: []wantViolation{{CheckReleaseByHolder, []uint64{2, 3}}},
	}, {
		// A release by a stale claim whose CAS names its own marker.
		name: "staleReleaseOldSeq",
		build: func(l *rfLog) {
			a := l.claim("A")        // 1
			l.claim("B")             // 2
			l.casAt(a.Released(), 1) // 3
		},
		want: []wantViolation{{CheckClaimChain, []uint64{2, 3}}},
	}, {
		// A marker on the claim subject in a thread whose markers are on
		// the run subject: an old claimant in a run-fenced stream.
		name: "mixedLayouts",
		build: func(l *rfLog) {
			l.claim("A") // 1
			w := eventgen.Writer{Thread: "T", Holder: "B"}
			l.add(w.Claimed(1), events.KindClaim, 0, "") // 2
		},
		want: []wantViolation{{CheckClaimChain, []uint64{2}}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newRFLog()
			tc.build(l)
			r := run(l.envs)
			var got []wantViolation
			for _, v := range r.Violations {
				got = append(got, wantViolation{v.Check, v.Seqs})
			}
			if !slices.EqualFunc(got, tc.want, func(x, y wantViolation) bool {
				return x.check == y.check && slices.Equal(x.seqs, y.seqs)
			}) {
				t.Errorf("violations = %v, want %v\n%+v", got, tc.want, r.Violations)
			}
			checkAgreesWithFold(t, l.envs)
		})
	}
}

// The claim layout is unchanged: a run-subject CAS on a consuming event in a
// thread whose markers are on the claim subject is not its fence.
func TestAuditor_Add_claimLayoutKeepsClaimFence(t *testing.T) {
	l := eventgen.NewLog()
	m1 := l.Post(poster.Post("a", "hi")).Seq // 1
	a := claim(l, "A")                       // 2
	l.CAS(a.Started("r1", m1))               // 3
	r := run(l.Envs)
	if len(r.Violations) != 1 || r.Violations[0].Check != CheckFence {
		t.Fatalf("violations = %+v, want one FenceNewestClaim", r.Violations)
	}
}

// runFenced moves l's markers to the run subject (eventgen.RunFenced).
func runFenced(envs []events.Envelope) []events.Envelope {
	return eventgen.RunFenced(events.Subjects{}, envs)
}

// Logs of well-behaved writers moved to the run-subject layout pass every
// check with no anomaly, and the audit and the fold agree on faulty ones.
func TestAuditor_runFencedRandomLogs(t *testing.T) {
	for seed := range uint64(10) {
		l, _ := randomLog(seed, eventgen.Config{Threads: 8, Events: 2000})
		envs := runFenced(l.Envs)
		if !slices.ContainsFunc(envs, func(e events.Envelope) bool { return e.Kind == events.KindRun && e.Type == events.TypeThreadClaimed }) {
			t.Fatalf("seed %d: no marker moved to the run subject", seed)
		}
		r := run(envs)
		if !r.OK() || r.AnomalyCount != 0 {
			t.Fatalf("seed %d: clean log reported: %d violations, first %+v; %d anomalies", seed, r.ViolationCount, r.Violations[:min(1, len(r.Violations))], r.AnomalyCount)
		}
	}
	for seed := range uint64(20) {
		l, _ := randomLog(seed, eventgen.Config{Threads: 3, Events: 800, Faults: 0.25, Chaos: true})
		checkAgreesWithFold(t, runFenced(l.Envs))
	}
}

// Spec: RunChain under RUNFENCE. A stale holder's run_output after a newer
// marker, with a compare-and-set that names the run subject's last
// sequence, cannot be an honest write: the holder would have read the
// marker and stopped (I4). The claim layout allows it (its run is active).
func TestAuditor_Add_runFenceStaleRunWrite(t *testing.T) {
	l := newRFLog()
	m1 := l.post(poster.Post("a", "x")) // 1
	a := l.claim("A")                   // 2
	l.cas(a.Started("r1", m1))          // 3
	l.claim("B")                        // 4
	l.cas(a.Output("r1", "o"))          // 5
	r := run(l.envs)
	if len(r.Violations) != 1 || r.Violations[0].Check != CheckRunChain || !slices.Equal(r.Violations[0].Seqs, []uint64{4, 5}) {
		t.Fatalf("violations = %+v, want RunChain at 4, 5", r.Violations)
	}
	checkAgreesWithFold(t, l.envs)
}

// With the stream's layout known (Options.KnownLayout), a forged first
// marker on the other subject is the violation, and the honest marker
// after it is not; inferred from the first marker, the violation falls on
// the honest one. Both layouts, each forged on the other's subject.
func TestAuditor_Add_knownLayoutFlagsForgedFirstMarker(t *testing.T) {
	for _, runFence := range []bool{true, false} {
		forgedOn, honestOn := events.KindClaim, events.KindRun
		if !runFence {
			forgedOn, honestOn = events.KindRun, events.KindClaim
		}
		l := newRFLog()
		f := eventgen.Writer{Thread: "T", Holder: "forger"}
		l.add(f.Claimed(1), forgedOn, 0, "")           // 1: a compare-and-set on an empty subject
		a := eventgen.Writer{Thread: "T", Holder: "A"} // the honest claim, on its layout's subject
		a.ClaimSeq = l.add(a.Claimed(1), honestOn, l.last[honestOn], "").Seq
		for _, known := range []bool{true, false} {
			au := NewWithOptions(Options{Subjects: events.Subjects{RunFence: runFence}, KnownLayout: known})
			for _, env := range l.envs {
				au.Add(env)
			}
			var at [][]uint64
			for _, v := range au.Report().Violations {
				if v.Check == CheckClaimChain {
					at = append(at, v.Seqs)
				}
			}
			want := uint64(2) // inferred: the honest marker is off the first one's subject
			if known {
				want = 1
			}
			if len(at) != 1 || !slices.Equal(at[0], []uint64{want}) {
				t.Errorf("runFence=%v known=%v: ClaimChain violations at %v, want one at [%d]", runFence, known, at, want)
			}
		}
	}
}
