package audit

import (
	"strings"
	"testing"

	"github.com/artifactr/artifactr/internal/eventgen"
)

// A forged second message_posted with a used message id, taken by a run,
// hands the id out twice: an I1 violation. A repost no run took is only an
// anomaly, and a run that takes the original is clean.
func TestAuditor_Add_repostedID(t *testing.T) {
	l := eventgen.NewLog()
	m1 := l.Post(poster.Post("m1", "hello")).Seq
	a := claim(l, "A")
	l.Fenced(a.Started("r1", m1))
	l.CAS(a.Completed("r1"))
	dup := l.Post(poster.Post("m1", "hello")).Seq // forged, or past the window
	if r := run(l.Envs); r.ViolationCount != 0 || r.AnomalyCount != 1 || !strings.Contains(r.Anomalies[0].Message, "repost") {
		t.Fatalf("an untaken repost: %+v, want one anomaly and no violation", r)
	}
	l.Fenced(a.Started("r2", dup))
	r := run(l.Envs)
	if r.ViolationCount != 1 || r.Violations[0].Check != "I1_ConsumedAtMostOnce" {
		t.Fatalf("a run took the repost of a consumed id: %+v, want one I1 violation", r)
	}
	if v := r.Violations[0]; !strings.Contains(v.Message, "repost of its message id") {
		t.Errorf("violation %q does not say why", v.Message)
	}
}
