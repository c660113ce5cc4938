package spec

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections/audit"
)

// Trace validation of the RUNFENCE layout (README, "Claims on the run
// subject"): a thread whose first marker is on its run subject is
// validated against the RUNFENCE model.

func newRunFenceLog() *tlog {
	l := newLog()
	l.runFence = true
	return l
}

// lastEnv is the envelope l appended last, to forge its checks.
func (l *tlog) lastEnv() *events.Envelope { return &(*l.envs)[len(*l.envs)-1] }

// An honest RUNFENCE log: a claim, a run with output, a request answered,
// its end, a release; a claim by another holder over a run of a second
// claim left active, which it abandons, then a run of its own.
func TestTrace_runFenceConforming(t *testing.T) {
	l := newRunFenceLog()
	m1 := l.post()
	l.claim("A")
	l.start("A", "r1", m1)
	l.output("A", "r1")
	l.ask("A", "r1", "q1")
	l.answer("A", "r1", "q1", l.post())
	l.output("A", "r1")
	l.end("A", "r1")
	l.release("A")
	m3 := l.post()
	l.claim("B")
	l.start("B", "r2", m3)
	l.output("B", "r2")
	// B's session lapses; C takes over and abandons r2.
	l.claim("C")
	l.abandon("C", "r2", "B")
	l.start("C", "r3", l.post())
	l.steer("C", "r3", l.post())
	l.output("C", "r3")
	l.fail("C", "r3")
	for _, e := range *l.envs {
		if e.Type == events.TypeThreadClaimed && e.Kind != events.KindRun {
			t.Fatalf("marker at %d on the %s subject", e.Seq, e.Kind)
		}
	}
	mustConform(t, l)
	if got := oneVerdict(t, *l.envs); got["t"] {
		t.Error("flagged")
	}
	// run_output is Output, a step of its claim's process, not a stutter.
	v := NewTraceValidator()
	for _, e := range *l.envs {
		v.Add(e)
	}
	if th := v.threads["t"]; !th.runFence {
		t.Error("the thread is not validated as RUNFENCE")
	}
}

// Each way a RUNFENCE log breaks the protocol is flagged by the plain audit
// and by the validator at the same event, with the same check; where the
// model sees it, the model refuses the step too.
func TestTrace_runFenceFlagged(t *testing.T) {
	claimSubj := events.Subjects{}.Thread("t", events.KindClaim)
	tests := []struct {
		name  string
		build func(l *tlog) uint64 // returns the seq to flag
		check string
		model bool // the model refuses the step too
	}{{
		// The holder's K is stale: it names the run subject's sequence
		// before its own output. JetStream refuses it; a log claiming it
		// landed breaks the fence.
		name: "staleRunSeq",
		build: func(l *tlog) uint64 {
			l.claim("A")
			l.start("A", "r1", l.post())
			l.output("A", "r1")
			m := l.post()
			l.steer("A", "r1", m)
			l.lastEnv().ExpectSeq -= 1
			return l.lastEnv().Seq
		},
		check: audit.CheckFence,
	}, {
		// A stale holder's consuming write after a newer marker, with a
		// compare-and-set that names the run subject's last sequence.
		name: "claimSeqNotNewest",
		build: func(l *tlog) uint64 {
			m := l.post()
			l.claim("A")
			l.claim("B")
			l.start("A", "r1", m)
			return l.lastEnv().Seq
		},
		check: audit.CheckFence, model: true,
	}, {
		// An old-protocol writer: the claim-subject fence in a RUNFENCE
		// thread.
		name: "claimSubjectFence",
		build: func(l *tlog) uint64 {
			m := l.post()
			l.claim("A")
			l.start("A", "r1", m)
			e := l.lastEnv()
			e.ExpectSeq, e.ExpectSubject = e.Event.GetClaimSeq(), claimSubj
			return e.Seq
		},
		check: audit.CheckFence,
	}, {
		// A marker whose compare-and-set is not the run subject's last
		// sequence: B read before A's start.
		name: "markerNotRunPrev",
		build: func(l *tlog) uint64 {
			m := l.post()
			l.claim("A")
			l.start("A", "r1", m)
			l.claim("B")
			l.lastEnv().ExpectSeq -= 1
			return l.lastEnv().Seq
		},
		check: audit.CheckClaimChain,
	}, {
		// A release by a stale claim.
		name: "staleRelease",
		build: func(l *tlog) uint64 {
			l.claim("A")
			l.claim("B")
			l.release("A")
			return l.lastEnv().Seq
		},
		check: audit.CheckReleaseByHolder, model: true,
	}, {
		// A stale holder's run_output after a newer marker: Output is not
		// enabled (the claimant's marker moved the run subject).
		name: "staleOutput",
		build: func(l *tlog) uint64 {
			l.claim("A")
			l.start("A", "r1", l.post())
			l.claim("B")
			l.output("A", "r1")
			return l.lastEnv().Seq
		},
		check: audit.CheckRunChain, model: true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newRunFenceLog()
			seq := tc.build(l)
			n := mustFlag(t, l, seq, "")
			if !slices.Equal(n.Checks, []string{tc.check}) {
				t.Errorf("checks %v, want [%s]", n.Checks, tc.check)
			}
			if got := n.Model != ""; got != tc.model {
				t.Errorf("the model refuses the step: %v, want %v (%q)", got, tc.model, n.Model)
			}
			if got := oneVerdict(t, *l.envs); !got["t"] {
				t.Error("not flagged")
			}
		})
	}
}

// Random behaviours of the RUNFENCE model, written as the logs the code
// would write (markers on the run subject, each holder write a
// compare-and-set on it, run_output included), conform, with one verdict
// from the plain audit and the validator.
func TestTrace_runFenceModelBehavioursAsLogs(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 1))
	n := 600
	if testing.Short() {
		n = 100
	}
	large := RunFenceConfig()
	large.Procs, large.NumMsgs, large.MaxClaims = 3, 3, 4
	outputs := 0
	for _, c := range []Config{RunFenceConfig(), large} {
		for i := range n / 2 {
			trail, l, _ := walk(t, c, r, 60)
			if rep := validate(*l.envs); !rep.OK() {
				t.Fatalf("%+v, walk %d: %s\nsteps: %v", c, i, rep.Nonconforming[0], trail)
			}
			oneVerdict(t, *l.envs)
			for _, e := range *l.envs {
				if e.Type == events.TypeRunOutput {
					outputs++
				}
			}
		}
	}
	if outputs == 0 {
		t.Fatal("no walk wrote a run_output")
	}
}

// A RUNFENCE thread is measured against the RUNFENCE models CI checks
// (runfence.cfg: 2 messages, 1 open request), not the claim layout's: three
// messages pending, within the claim layout's checked models, are beyond.
func TestTrace_runFenceBeyondChecked(t *testing.T) {
	build := func(l *tlog) {
		l.claim("A")
		l.start("A", "r1", l.post())
		l.post()
		l.post()
		l.post() // 6: three pending
	}
	claim, rf := newLog(), newRunFenceLog()
	build(claim)
	build(rf)
	if r := validate(*claim.envs); !r.OK() || len(r.Beyond) != 0 {
		t.Fatalf("claim layout: report = %+v, want OK and nothing beyond", r)
	}
	r := validate(*rf.envs)
	if !r.OK() {
		t.Fatalf("%s", r.Nonconforming[0])
	}
	if len(r.Beyond) != 1 || r.Beyond[0].Seq != 6 || !strings.Contains(r.Beyond[0].What, "messages pending") {
		t.Errorf("beyond %+v, want pending messages at 6", r.Beyond)
	}
}

// With the stream's layout known (audit.Options.KnownLayout), a forged
// first marker on the claim subject of a run-fenced stream is where the
// validation fails; inferred from the first marker, it fails at the honest
// marker after it. The verdict is the shared rules' (the audit's
// KnownLayout); the validator takes the stream's layout for its model too.
func TestTrace_knownLayoutFlagsForgedFirstMarker(t *testing.T) {
	l := newLog() // the forger's marker on the claim subject
	l.post()
	l.claim("forger")
	forged := l.lastEnv().Seq
	l.runFence = true // the honest runner's, on the run subject
	l.claim("A")
	honest := l.lastEnv().Seq
	for _, known := range []bool{true, false} {
		v := NewTraceValidatorWith(audit.Options{Subjects: events.Subjects{RunFence: true}, KnownLayout: known})
		for _, env := range *l.envs {
			v.Add(env)
		}
		bad := v.Report().Nonconforming
		want := honest
		if known {
			want = forged
		}
		if len(bad) != 1 || bad[0].Seq != want {
			t.Errorf("known=%v: nonconforming %+v, want one at %d", known, bad, want)
		}
	}
}
