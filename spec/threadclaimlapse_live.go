package spec

// Liveness of ThreadClaimLapse: EventuallyConsumed in the .tla.
//
// The safety model bounds the claims by MaxClaims, so its behaviours end
// and any of them may end with a message pending for want of a marker.
// The liveness model has no such bound: after every step the claim
// sequences are renumbered, 0 staying 0, the newest (claimSeq) becoming
// min(claimSeq, 2), and every older one 1. The actions compare a claim
// sequence only with claimSeq (=, and < in AbandonOnlyOlder) and append
// claimSeq + 1, so the renumbering is a bisimulation, and the model is
// finite with as many takeovers as a behaviour likes.

// liveFair are the runners' steps, each taken with weak fairness per
// process: RunnerFair in the .tla. Not Post and Ask (clients and runs need
// not post or ask), nor Renew and Release (a holder may stop renewing,
// and may keep an idle thread), nor Lapse, the environment's. Releases
// with a message pending happen finitely often (ReleasePending).
var liveFair = map[string]bool{
	"Acquire": true, "ReadClaim": true, "Claim": true, "Load": true, "Abandon": true,
	"RunStart": true, "StartFenced": true, "Reply": true, "Steer": true, "ReplyFenced": true,
	"RunEnd": true, "CheckLease": true, "Reread": true,
}

// stalledSteps are the steps a stalled holder takes finitely often
// (StalledStep in the .tla): the fair ones and Output, which is not fair
// (a run need not output), but a holder that outputs forever has not
// stalled, and with RUNFENCE its outputs refuse every other claim.
var stalledSteps = func() map[string]bool {
	m := map[string]bool{"Output": true}
	for a := range liveFair {
		m[a] = true
	}
	return m
}()

// renumberClaims is the renumbering above.
func renumberClaims(s ThreadState) ThreadState {
	cs := s.claimSeq
	claim := func(x uint8) uint8 {
		switch {
		case x == 0:
			return 0
		case x >= cs:
			return min(cs, 2)
		}
		return 1
	}
	s.claimSeq = claim(cs)
	s.oldSeq = claim(s.oldSeq)
	for r := range s.runClaim {
		s.runClaim[r] = claim(s.runClaim[r])
	}
	for p := range maxProcs {
		s.mySeq[p], s.readSeq[p] = claim(s.mySeq[p]), claim(s.readSeq[p])
	}
	return s
}

// liveModel is ThreadClaimLapse(c) with its claim sequences renumbered
// after every step. c.MaxClaims must be at least 3, so that Claim's bound
// never binds.
func liveModel(c Config) (Model[ThreadState, ThreadState], error) {
	m, err := ThreadClaimLapse(c)
	if err != nil {
		return m, err
	}
	acts := make([]Action[ThreadState], len(m.Actions))
	for i, a := range m.Actions {
		next := a.Next
		acts[i] = Action[ThreadState]{Name: a.Name, Next: func(s ThreadState) []Succ[ThreadState] {
			out := next(s)
			for j := range out {
				out[j].State = renumberClaims(out[j].State)
			}
			return out
		}}
	}
	m.Actions = acts
	return m, nil
}

// LiveFairness is an assumption under which EventuallyConsumed is checked.
type LiveFairness int

const (
	// RunnersFair is EventuallyConsumed's in the .tla: every runner's
	// steps are weakly fair, and sessions lapse finitely often (a takeover
	// after every lapse, forever, is starvation no fence can stop).
	RunnersFair LiveFairness = iota
	// HolderStalls is EventuallyConsumedStalled's: p1 stalls for good at some point (its
	// runner steps happen finitely often) while its renewals go on; the
	// others' steps are weakly fair, and so is Lapse: a session whose
	// holder stalls lapses (its TTL), and the others notice.
	HolderStalls
)

func (f LiveFairness) String() string {
	if f == HolderStalls {
		return "HolderStalls"
	}
	return "RunnersFair"
}

// EventuallyConsumed checks the .tla's EventuallyConsumed on the liveness
// model of c: under the fairness f, every posted message is consumed. It
// looks for a fair cycle (or a fair stutter) in which a message stays
// pending.
func EventuallyConsumed(c Config, f LiveFairness) (LiveResult[ThreadState], error) {
	m, err := liveModel(c)
	if err != nil {
		return LiveResult[ThreadState]{}, err
	}
	l := Liveness[ThreadState]{
		Fair: func(action, _ string) bool { return liveFair[action] },
		// A release in a Bad state has a message pending: ReleasePending.
		Finite: func(action, _ string) bool { return action == "Lapse" || action == "Release" || action == "Forge" },
		Bad:    func(s ThreadState) bool { return s.taken < s.posted },
	}
	if f == HolderStalls {
		stalled := procName(0)
		l.Fair = func(action, arg string) bool {
			return action == "Lapse" || liveFair[action] && arg != stalled
		}
		l.Finite = func(action, arg string) bool {
			return action == "Release" || action == "Forge" || stalledSteps[action] && arg == stalled
		}
	}
	return CheckLiveness(m, l), nil
}
