package spec

import (
	"slices"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections/audit"
)

// Every audit check is in auditRules, and each names what the spec has
// for it: an invariant, a property or an action of the model; a rule with
// none is a check of what the model cannot see, and says what.
func TestRules_everyCheckIsTheSpecsOrSaysWhatItSees(t *testing.T) {
	m := model(t, true)
	names := append(m.InvariantNames(), m.PropertyNames()...)
	for _, a := range m.Actions {
		names = append(names, a.Name)
	}
	for _, c := range audit.CheckNames {
		r, ok := auditRules[c]
		if !ok {
			t.Errorf("audit check %s is not in auditRules", c)
			continue
		}
		for _, n := range r.spec {
			if !slices.Contains(names, n) {
				t.Errorf("%s: %q is no invariant, property or action of the model", c, n)
			}
		}
		if len(r.spec) == 0 && r.outside == "" {
			t.Errorf("%s: neither the spec's nor a check of what the model cannot see", c)
		}
	}
	if len(auditRules) != len(audit.CheckNames) {
		t.Errorf("auditRules has %d rules, the audit %d checks", len(auditRules), len(audit.CheckNames))
	}
}

// oneVerdict requires the plain audit and the validator to flag the same
// threads, and every nonconformance to name the audit's checks: the model
// never refuses a step the rules accept. It returns the flagged threads.
func oneVerdict(t *testing.T, envs []events.Envelope) map[string]bool {
	t.Helper()
	a := audit.NewWithOptions(audit.Options{MaxFindings: -1})
	v := NewTraceValidator()
	for _, e := range envs {
		a.Add(e)
		v.Add(e)
	}
	byAudit := map[string]bool{}
	for _, x := range a.Report().Violations {
		byAudit[x.Thread] = true
	}
	bySpec := map[string]bool{}
	for _, n := range v.Report().Nonconforming {
		bySpec[n.Thread] = true
		if len(n.Checks) == 0 {
			t.Errorf("the model alone refuses %s", n)
		}
	}
	for th := range byAudit {
		if !bySpec[th] {
			t.Errorf("thread %s: flagged by the plain audit, not by the validator", th)
		}
	}
	for th := range bySpec {
		if !byAudit[th] {
			t.Errorf("thread %s: flagged by the validator, not by the plain audit", th)
		}
	}
	return bySpec
}

// Issue 27, item 6: rule by rule, a log that breaks it, flagged by the
// plain audit and by the validator at the same event with the same check;
// model says whether the model refuses the step too (the rule's spec
// catches it) or not (auditRules' outside: the model cannot see it).
func TestRules_oneVerdictPerRule(t *testing.T) {
	tests := []struct {
		name  string
		check string
		model bool
		build func(l *tlog)
	}{
		{"I1: a stale start of a message another run took", audit.CheckI1, true, func(l *tlog) {
			m := l.post()
			l.claim("A")
			l.claim("B")
			l.start("B", "rB", m)
			l.start("A", "rA", m)
		}},
		{"I1: an answer naming a consumed message while another is pending", audit.CheckI1, false, func(l *tlog) {
			m := l.post()
			l.claim("A")
			l.start("A", "r1", m)
			l.ask("A", "r1", "q1")
			l.post()
			l.answer("A", "r1", "q1", m)
		}},
		{"I3: a second start by the holder", audit.CheckI3, true, func(l *tlog) {
			l.claim("A")
			l.start("A", "r1", l.post())
			l.start("A", "r2", l.post())
		}},
		{"FenceNewestClaim: a stale steering", audit.CheckFence, true, func(l *tlog) {
			l.claim("A")
			l.start("A", "r1", l.post())
			m := l.post()
			l.claim("B")
			l.steer("A", "r1", m)
		}},
		{"FenceNewestClaim: a start with no fence headers", audit.CheckFence, false, func(l *tlog) {
			m := l.post()
			l.claim("A")
			l.start("A", "r1", m)
			env := &(*l.envs)[len(*l.envs)-1]
			env.ExpectSeq, env.ExpectSubject = 0, ""
		}},
		{"FenceNewestClaim: another holder under the newest claim_seq", audit.CheckFence, false, func(l *tlog) {
			l.claim("A")
			l.claims["X"] = events.Claim{Thread: "t", Holder: "X", Seq: 1}
			l.start("X", "r1", l.post())
		}},
		{"ClaimChain: a claim expecting a stale sequence", audit.CheckClaimChain, false, func(l *tlog) {
			l.claim("A")
			l.claim("B")
			(*l.envs)[len(*l.envs)-1].ExpectSeq = 0
		}},
		{"NoEndAfterAbandon: the end of an abandoned run", audit.CheckNoEndAfterAbandon, true, func(l *tlog) {
			l.claim("A")
			l.start("A", "r1", l.post())
			l.claim("B")
			l.abandon("B", "r1", "A")
			l.end("A", "r1")
		}},
		{"AnswerOnce: the one request answered twice", audit.CheckAnswerOnce, true, func(l *tlog) {
			l.claim("A")
			l.start("A", "r1", l.post())
			l.ask("A", "r1", "q1")
			l.answer("A", "r1", "q1", l.post())
			l.answer("A", "r1", "q1", l.post())
		}},
		{"AnswerOnce: answered twice while another request is open", audit.CheckAnswerOnce, false, func(l *tlog) {
			l.claim("A")
			l.start("A", "r1", l.post())
			l.ask("A", "r1", "q1")
			l.answer("A", "r1", "q1", l.post())
			l.ask("A", "r1", "q2")
			l.answer("A", "r1", "q1", l.post())
		}},
		{"AnswerOnce: a request id opened twice", audit.CheckAnswerOnce, false, func(l *tlog) {
			l.claim("A")
			l.start("A", "r1", l.post())
			l.ask("A", "r1", "q1")
			l.ask("A", "r1", "q1")
		}},
		{"RunChain: an output with no check on the run subject", audit.CheckRunChain, false, func(l *tlog) {
			l.claim("A")
			l.start("A", "r1", l.post())
			l.output("A", "r1")
			(*l.envs)[len(*l.envs)-1].ExpectSeq = 0
		}},
		{"RejectOnlyIdle: a reject post during a run", audit.CheckRejectOnlyIdle, true, func(l *tlog) {
			l.claim("A")
			l.start("A", "r1", l.post())
			l.postWith(events.StrategyReject)
		}},
		{"NoneSkipped: a start that passes a message over", audit.CheckNoneSkipped, false, func(l *tlog) {
			l.post()
			m2 := l.post()
			l.claim("A")
			l.start("A", "r1", m2)
		}},
		{"NoneSkipped: a start naming a message never posted, none pending", audit.CheckNoneSkipped, true, func(l *tlog) {
			l.claim("A")
			l.start("A", "r1", 99)
		}},
		{"NoneSkipped: steering naming a message never posted while one is pending", audit.CheckNoneSkipped, false, func(l *tlog) {
			l.claim("A")
			l.start("A", "r1", l.post())
			l.post()
			l.steer("A", "r1", 99)
		}},
		{"RunByHolder: a run that ends twice", audit.CheckRunByHolder, true, func(l *tlog) {
			l.claim("A")
			l.start("A", "r1", l.post())
			l.end("A", "r1")
			l.end("A", "r1")
		}},
		{"RunByHolder: an output by another holder under the run's claim", audit.CheckRunByHolder, false, func(l *tlog) {
			l.claim("A")
			l.start("A", "r1", l.post())
			l.claims["X"] = events.Claim{Thread: "t", Holder: "X", Seq: 1}
			l.output("X", "r1")
		}},
		{"ReleaseByHolder: a stale release", audit.CheckReleaseByHolder, true, func(l *tlog) {
			l.claim("A")
			l.claim("B")
			l.release("A")
		}},
		{"ReleaseByHolder: a release by another holder", audit.CheckReleaseByHolder, false, func(l *tlog) {
			l.claim("A")
			l.claims["X"] = events.Claim{Thread: "t", Holder: "X", Seq: 1}
			l.release("X")
		}},
		{"GivenToActive: an answer when no request is open", audit.CheckGivenToActive, true, func(l *tlog) {
			l.claim("A")
			l.start("A", "r1", l.post())
			l.answer("A", "r1", "q9", l.post())
		}},
		{"GivenToActive: steering naming another run", audit.CheckGivenToActive, false, func(l *tlog) {
			l.claim("A")
			l.start("A", "r1", l.post())
			l.steer("A", "r9", l.post())
		}},
		{"AbandonOnlyOlder: a holder abandons its own run", audit.CheckAbandonOnlyOlder, true, func(l *tlog) {
			l.claim("A")
			l.start("A", "r1", l.post())
			l.abandon("A", "r1", "A")
		}},
		{"AbandonOnlyOlder: an abandon naming another run than the active one", audit.CheckAbandonOnlyOlder, false, func(l *tlog) {
			l.claim("A")
			l.start("A", "r1", l.post())
			l.claim("B")
			l.abandon("B", "r9", "A")
		}},
	}
	covered := map[string]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			covered[tc.check] = true
			l := newLog()
			tc.build(l)
			last := uint64(len(*l.envs))
			if flagged := oneVerdict(t, *l.envs); !flagged["t"] {
				t.Fatal("not flagged")
			}
			n := validate(*l.envs).Nonconforming[0]
			t.Logf("%s", n)
			if n.Seq != last || !slices.Contains(n.Checks, tc.check) {
				t.Errorf("flagged seq %d with %v, want seq %d with %s", n.Seq, n.Checks, last, tc.check)
			}
			if got := n.Model != ""; got != tc.model {
				t.Errorf("the model refuses it: %v, want %v (model: %q)", got, tc.model, n.Model)
			}
		})
	}
	for _, c := range audit.CheckNames {
		if !covered[c] {
			t.Errorf("no log breaks %s", c)
		}
	}
}

// The hand-made logs of the trace tests, conforming or not, get one
// verdict per thread from the audit and the validator.
func TestRules_oneVerdictOnTheTraceTestsLogs(t *testing.T) {
	long := newLog()
	active, prev := "", ""
	for i := range 30 {
		h := "h" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		long.claim(h)
		if active != "" {
			long.abandon(h, active, prev)
		}
		m1, m2 := long.post(), long.post()
		run := h + "-r1"
		long.start(h, run, m1)
		long.ask(h, run, h+"-q")
		long.answer(h, run, h+"-q", m2)
		active, prev = run, h
	}
	if flagged := oneVerdict(t, *long.envs); len(flagged) != 0 {
		t.Errorf("a conforming log flagged: %v", flagged)
	}
}
