// Package spectest holds test helpers for the spec's trace validation.
package spectest

import (
	"fmt"
	"slices"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections/audit"
	"github.com/artifactr/artifactr/spec"
)

// Verdicts are the plain audit's and the trace validator's verdicts on one
// log, per thread.
type Verdicts struct {
	Audit  audit.Report
	Spec   spec.TraceReport
	ByBoth []string // the threads both flag, sorted
	// Disagree lists, one line each, a thread that one flags and the other
	// does not, and a nonconformance that names no audit check (the model
	// alone refuses it). One rule set (issue 27) means it is empty.
	Disagree []string
}

// OneVerdict runs the plain audit and the trace validator over envs and
// compares their verdicts per thread.
func OneVerdict(envs []events.Envelope) Verdicts { return OneVerdictWith(envs, events.Subjects{}) }

// OneVerdictWith is OneVerdict for a log of subjects subj, such as a
// partitioned one (the fence names its partition's claim subject).
func OneVerdictWith(envs []events.Envelope, subj events.Subjects) Verdicts {
	a := audit.NewWithOptions(audit.Options{Subjects: subj, MaxFindings: -1})
	v := spec.NewTraceValidatorWith(audit.Options{Subjects: subj})
	for _, e := range envs {
		a.Add(e)
		v.Add(e)
	}
	out := Verdicts{Audit: a.Report(), Spec: v.Report()}
	byAudit := map[string]bool{}
	for _, x := range out.Audit.Violations {
		byAudit[x.Thread] = true
	}
	for _, n := range out.Spec.Nonconforming {
		if len(n.Checks) == 0 {
			out.Disagree = append(out.Disagree, fmt.Sprintf("the model alone refuses %s", n))
		}
		if !byAudit[n.Thread] {
			out.Disagree = append(out.Disagree, fmt.Sprintf("thread %s: flagged by the validator, not by the plain audit: %s", n.Thread, n))
			continue
		}
		delete(byAudit, n.Thread)
		out.ByBoth = append(out.ByBoth, n.Thread)
	}
	for th := range byAudit {
		out.Disagree = append(out.Disagree, fmt.Sprintf("thread %s: flagged by the plain audit, not by the validator", th))
	}
	slices.Sort(out.ByBoth)
	slices.Sort(out.Disagree)
	return out
}
