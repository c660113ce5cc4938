package spec

import (
	"testing"
	"time"
)

func TestMeasure(t *testing.T) {
	for _, c := range []Config{
		DefaultConfig(),
		{Procs: 2, NumMsgs: 2, MaxClaims: 3, MaxOpen: 1},
		{Procs: 2, NumMsgs: 3, MaxClaims: 3, MaxOpen: 1, Fence: true},
		{Procs: 2, NumMsgs: 3, MaxClaims: 4, MaxOpen: 1, Fence: true},
		{Procs: 3, NumMsgs: 2, MaxClaims: 3, MaxOpen: 1, Fence: true},
		LargeConfig(),
	} {
		m, _ := ThreadClaimLapse(c)
		st := time.Now()
		res := Check(m)
		t.Logf("%+v: %d distinct, %d transitions, depth %d, violated %q, %v", c, res.Distinct, res.Transitions, res.Depth, res.Violated, time.Since(st))
		if res.Violated != "" && c.Fence {
			t.Log(m.FormatTrace(res.Trace))
		}
		if !c.Fence {
			t.Log(res.Trace)
		}
	}
}
