package eventgen

import (
	"slices"

	"github.com/artifactr/artifactr/events"
)

// RunFenced rewrites envs, a log of the claim layout decoded for subjects,
// into the RUNFENCE layout (spec/README.md, "Claims on the run subject"):
// each well-formed marker (thread_claimed, thread_released) moves to its
// thread's run subject, and each check that held (a marker's on the claim
// subject, a fence, a compare-and-set on the run subject) becomes a
// compare-and-set on the run subject's last sequence, markers included.
// Checks that did not hold stay as they were. It lets the random and
// fuzzed logs, which the codec decodes only in the claim layout, exercise
// the folds on markers stored on the run subject.
func RunFenced(subjects events.Subjects, envs []events.Envelope) []events.Envelope {
	type last struct{ claim, oldRun, run uint64 }
	lasts := map[string]*last{}
	out := slices.Clone(envs)
	for i := range out {
		env := &out[i]
		l := lasts[env.Thread]
		if l == nil {
			l = &last{}
			lasts[env.Thread] = l
		}
		typ := events.TypeOf(env.Event)
		switch {
		case env.Err == nil && env.Kind == events.KindClaim && (typ == events.TypeThreadClaimed || typ == events.TypeThreadReleased):
			if env.ExpectSeq == l.claim && (env.ExpectSubject == "" || env.ExpectSubject == env.Subject) {
				env.ExpectSeq, env.ExpectSubject = l.run, ""
			}
			l.claim = env.Seq
			env.Kind, env.Subject = events.KindRun, subjects.Thread(env.Thread, events.KindRun)
			l.run = env.Seq
		case env.Kind == events.KindClaim:
			l.claim = env.Seq
		case env.Kind == events.KindRun:
			fence := env.Event != nil && env.ExpectSeq != 0 && env.ExpectSeq == env.Event.GetClaimSeq() &&
				env.ExpectSubject == subjects.Thread(env.Thread, events.KindClaim)
			if fence || env.ExpectSeq == l.oldRun && env.ExpectSeq != 0 && env.ExpectSubject == "" {
				env.ExpectSeq, env.ExpectSubject = l.run, ""
			}
			l.oldRun, l.run = env.Seq, env.Seq
		}
	}
	return out
}
