package spec

import (
	"fmt"
	"slices"
)

// The validator steps a model with the capacities of traceConfig and
// renumbers it after every event; the model checkers explore the constants
// of ThreadClaimLapse.cfg and a few others. A thread whose log goes beyond those constants
// is still validated, but by a model no checker explored at that size: the
// report says so (TraceReport.Beyond), once per thread and dimension,
// rather than accept it silently.

// otherCheckedConfigs are the constants besides DefaultConfig that CI
// checks every invariant and property on
// (TestThreadClaimLapse_otherConstants_hold).
var otherCheckedConfigs = []Config{
	{Procs: 1, NumMsgs: 3, MaxClaims: 3, MaxOpen: 2, Fence: true},
	{Procs: 2, NumMsgs: 3, MaxClaims: 3, MaxOpen: 1, Fence: true},
	{Procs: 2, NumMsgs: 2, MaxClaims: 3, MaxOpen: 2, Fence: true},
}

// checkedReach is, in each dimension alone, the most that a model of cs
// has: for checkedConfigs, DefaultConfig's and otherCheckedConfigs'
// constants.
func checkedReach(cs []Config) Config {
	r := cs[0]
	for _, c := range cs[1:] {
		r.Procs, r.NumMsgs, r.MaxOpen = max(r.Procs, c.Procs), max(r.NumMsgs, c.NumMsgs), max(r.MaxOpen, c.MaxOpen)
	}
	return r
}

// Beyond is the first event of a thread at which its log went beyond the
// models checked in CI in one dimension.
type Beyond struct {
	Thread string `json:"thread"`
	Seq    uint64 `json:"seq"`
	What   string `json:"what"`
}

// reach dimensions, one bit each in threadTrace.reach.
const (
	reachClaims  uint8 = 1 << iota // claims that can still write
	reachPending                   // messages pending
	reachOpen                      // open requests of a run
	// reachJoint: each dimension is within some checked model, but no one
	// checked model has them all at once (2 claims, 3 pending and 2 open
	// requests, say).
	reachJoint
)

// checkedConfigs are every model CI checks every invariant and property on.
var checkedConfigs = append([]Config{DefaultConfig()}, otherCheckedConfigs...)

// runFenceCheckedConfigs are the RUNFENCE models CI checks
// (TestRunFence_configsHold), against which a thread whose markers are on
// its run subject is measured.
var runFenceCheckedConfigs = []Config{RunFenceConfig(), RunFenceForgerConfig()}

// coveredJointly reports whether one model of cs has at least claims
// processes, pending messages and open requests at once.
func coveredJointly(cs []Config, claims, pending, open int) bool {
	for _, c := range cs {
		if claims <= c.Procs && pending <= c.NumMsgs && open <= c.MaxOpen {
			return true
		}
	}
	return false
}

// noteReach records the dimensions in which th, after the event at seq,
// is beyond the checked models' reach for the first time: the RUNFENCE
// ones for a thread whose markers are on its run subject.
func (v *TraceValidator) noteReach(th *threadTrace, seq uint64) {
	cs := checkedConfigs
	if th.runFence {
		cs = runFenceCheckedConfigs
	}
	c := checkedReach(cs)
	claims := len(th.slots) - countNil(th.slots[:])
	open := 0
	for _, s := range th.frontier {
		for _, n := range s.reqs {
			open = max(open, int(n))
		}
	}
	for _, d := range []struct {
		bit       uint8
		n, bound  int
		what, cfg string
	}{
		{reachClaims, claims, c.Procs, "claims that can still write", "Procs"},
		{reachPending, len(th.pending), c.NumMsgs, "messages pending", "NumMsgs"},
		{reachOpen, open, c.MaxOpen, "open requests of a run", "MaxOpen"},
	} {
		if d.n > d.bound && th.reach&d.bit == 0 {
			th.reach |= d.bit
			v.beyond = append(v.beyond, Beyond{Thread: th.id, Seq: seq, What: fmt.Sprintf(
				"%d %s, beyond the checked models' %s = %d", d.n, d.what, d.cfg, d.bound)})
		}
	}
	alone := claims <= c.Procs && len(th.pending) <= c.NumMsgs && open <= c.MaxOpen
	if alone && th.reach&reachJoint == 0 && !coveredJointly(cs, claims, len(th.pending), open) {
		th.reach |= reachJoint
		v.beyond = append(v.beyond, Beyond{Thread: th.id, Seq: seq, What: fmt.Sprintf(
			"%d claims that can still write, %d messages pending and %d open requests at once: each is within a checked model, but no one checked model has them all",
			claims, len(th.pending), open)})
	}
}

func countNil(hs []*holderInfo) int {
	n := 0
	for _, h := range hs {
		if h == nil {
			n++
		}
	}
	return n
}

// beyondReport returns the Beyond entries so far.
func (v *TraceValidator) beyondReport() []Beyond { return slices.Clone(v.beyond) }
