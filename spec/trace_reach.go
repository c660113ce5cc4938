package spec

import (
	"fmt"
	"slices"
)

// The validator steps a model with the capacities of traceConfig and
// renumbers it after every event; the model checkers explore the constants
// of ThreadClaimLapse.cfg. A thread whose log goes beyond those constants
// is still validated, but by a model no checker explored at that size: the
// report says so (TraceReport.Beyond), once per thread and dimension,
// rather than accept it silently.

// Beyond is the first event of a thread at which its log went beyond the
// model checked in CI in one dimension.
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
)

// noteReach records the dimensions in which th, after the event at seq,
// is beyond DefaultConfig for the first time.
func (v *TraceValidator) noteReach(th *threadTrace, seq uint64) {
	c := DefaultConfig()
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
				"%d %s, beyond the checked model's %s = %d", d.n, d.what, d.cfg, d.bound)})
		}
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
