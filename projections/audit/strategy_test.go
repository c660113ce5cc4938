package audit

import (
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/eventgen"
	"github.com/artifactr/artifactr/projections"
)

func postWith(l *eventgen.Log, id string, st events.Strategy, chk events.Check) uint64 {
	ev := poster.Post(id, id)
	ev.GetMessagePosted().Strategy = string(st)
	if chk.Mode == events.CheckSubject { // the reject check: on the run subject
		env := l.Event(ev, events.Check{})
		env.ExpectSeq, env.ExpectSubject = chk.Seq, "threads.T.run"
		l.Envs[len(l.Envs)-1] = env
		return env.Seq
	}
	return l.Event(ev, chk).Seq
}

// The events of cancel and the strategies, as the runner and clients write
// them, audit clean, and the fold agrees: no anomaly.
func TestAuditor_Add_strategiesClean(t *testing.T) {
	l := eventgen.NewLog()
	l.Post(events.NewThreadConfigured("T", eventgen.Base, events.StrategyReject))
	m1 := postWith(l, "a", "", events.ExpectLast(0))
	a := claim(l, "A")
	l.Fenced(a.Started("r1", m1))
	l.Post(events.NewCancelRequested("T", eventgen.Base, "", "c1"))
	f := a.Failed("r1")
	f.GetRunFailed().Reason = events.ReasonCancelled
	l.CAS(f)
	m2 := postWith(l, "b", events.StrategyReject, events.ExpectLast(l.LastOn("threads.T.run")))
	l.Fenced(a.Started("r2", m2))
	m3 := postWith(l, "c", events.StrategyRollback, events.Check{})
	l.CAS(events.NewRunInterrupted(events.Claim{Thread: "T", Holder: "A", Seq: a.ClaimSeq}, eventgen.Base, "r2", m3, true))
	f = a.Failed("r2")
	f.GetRunFailed().Reason = events.ReasonInterrupted
	l.CAS(f)
	l.Fenced(a.Started("r3", m3))
	l.CAS(a.Completed("r3"))

	r := run(l.Envs)
	if !r.OK() || r.AnomalyCount != 0 {
		t.Fatalf("report not clean: %+v", r)
	}
	if r.Checks[CheckRejectOnlyIdle] != 3 {
		t.Errorf("RejectOnlyIdle examined %d posts, want 3", r.Checks[CheckRejectOnlyIdle])
	}
	v := projections.Fold("T", l.Envs)
	if len(v.Anomalies) != 0 {
		t.Fatalf("fold anomalies: %+v", v.Anomalies)
	}
	if v.Strategy != events.StrategyReject || !v.Runs[1].RolledBack || v.Runs[0].CancelSeq == 0 {
		t.Errorf("strategy %q, r2 rolled back %v, r1 cancel %d", v.Strategy, v.Runs[1].RolledBack, v.Runs[0].CancelSeq)
	}
	// r3's history leaves out r2's prompt (b): only a.
	if h := v.History(m3); len(h) != 1 || h[0].Seq != m1 {
		t.Errorf("history of r3 = %+v, want only message %d", h, m1)
	}
}

// A reject post stored while a run is active breaks RejectOnlyIdle: it
// skipped the check on the run subject that would have refused it.
func TestAuditor_Add_rejectWhileActive(t *testing.T) {
	l := eventgen.NewLog()
	m1 := l.Post(poster.Post("a", "hi")).Seq
	a := claim(l, "A")
	start := l.Fenced(a.Started("r1", m1)).Seq
	bad := postWith(l, "b", events.StrategyReject, events.Check{})
	r := run(l.Envs)
	if r.ViolationCount != 1 || r.Violations[0].Check != CheckRejectOnlyIdle {
		t.Fatalf("violations %+v, want one RejectOnlyIdle", r.Violations)
	}
	if got := r.Violations[0].Seqs; len(got) != 2 || got[0] != start || got[1] != bad {
		t.Errorf("seqs %v, want [%d %d]", got, start, bad)
	}
}

// run_interrupted is a run event: a compare-and-set on the run subject.
func TestAuditor_Add_interruptWithoutCheck(t *testing.T) {
	l := eventgen.NewLog()
	m1 := l.Post(poster.Post("a", "hi")).Seq
	a := claim(l, "A")
	l.Fenced(a.Started("r1", m1))
	m2 := postWith(l, "b", events.StrategyInterrupt, events.Check{})
	l.Event(events.NewRunInterrupted(events.Claim{Thread: "T", Holder: "A", Seq: a.ClaimSeq}, eventgen.Base, "r1", m2, false), events.Check{})
	r := run(l.Envs)
	if r.ViolationCount != 1 || r.Violations[0].Check != CheckRunChain {
		t.Fatalf("violations %+v, want one RunChain", r.Violations)
	}
}
