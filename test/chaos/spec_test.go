package chaos

import (
	"strings"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections/audit"
	"github.com/artifactr/artifactr/spec"
	"github.com/artifactr/artifactr/spec/spectest"
)

// specTrace validates the whole log against the spec's model
// (spec.TraceValidator, as artifactr audit --spec): each thread's events
// must be steps ThreadClaimLapse allows.
func specTrace(envs []events.Envelope, subj events.Subjects) spec.TraceReport {
	v := spec.NewTraceValidatorWith(audit.Options{Subjects: subj})
	for _, e := range envs {
		v.Add(e)
	}
	return v.Report()
}

// checkSpecTrace fails t with the first nonconforming events, if any.
func checkSpecTrace(t *testing.T, envs []events.Envelope, subj events.Subjects, seed uint64) {
	t.Helper()
	r := specTrace(envs, subj)
	for i, n := range r.Nonconforming {
		if i == 5 {
			break
		}
		t.Errorf("spec: %s", n)
		if i < 3 {
			t.Logf("the events of %s up to %d:\n%s", n.Thread, n.Seq, strings.Join(around(envs, n.Thread, n.Seq, 24), "\n"))
		}
	}
	if !r.OK() {
		t.Errorf("spec: %d of %d threads do not conform (seed %d)", len(r.Nonconforming), r.Threads, seed)
	} else {
		t.Logf("spec: %d events of %d threads, each a step of ThreadClaimLapse", r.Events, r.Threads)
	}
}

// checkOneVerdict fails t if the plain audit and the trace validator judge
// a thread of envs apart (issue 27: one rule set), and returns the threads
// both flag.
func checkOneVerdict(t *testing.T, envs []events.Envelope, subj events.Subjects, seed uint64) []string {
	t.Helper()
	v := spectest.OneVerdictWith(envs, subj)
	for i, d := range v.Disagree {
		if i == 5 {
			break
		}
		t.Errorf("one verdict (seed %d): %s", seed, d)
	}
	return v.ByBoth
}
