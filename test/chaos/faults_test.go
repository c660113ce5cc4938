package chaos

import (
	"context"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/sys"
)

// stallHook is a runner's BeforeAppend: while faults are on, it stalls some
// appends for longer than the claim TTL, a share of them (pPause) with the
// thread's holder paused until the append returns (see chaosStore). A
// paused stall before a fenced write makes a stale consuming write, which
// the fence must refuse once another runner took the thread; one before a
// run's end makes a stale end, which the run subject's compare-and-set must
// refuse once the run was abandoned.
func (h *harness) stallHook(cs *chaosStore) func(context.Context, *eventspb.Event) {
	return func(ctx context.Context, ev *eventspb.Event) {
		if !h.faultsOn.Load() {
			return
		}
		typ := events.TypeOf(ev)
		var p float64
		switch typ {
		case events.TypeRunStarted:
			p = h.cfg.pStallStart
		case events.TypeAnswerGiven, events.TypeSteeringGiven:
			p = h.cfg.pStallFenced
		case events.TypeRunAbandoned:
			p = h.cfg.pStallAbandon
		case events.TypeRunCompleted, events.TypeRunFailed:
			p = h.cfg.pStallEnd
		}
		if !h.rng.chance(p) {
			return
		}
		d := h.rng.scaled(h.cfg.ttl, h.cfg.stall)
		kind := "stall:" + string(typ)
		if h.rng.chance(h.cfg.pPause) && cs.pauseUntilAppend(ev.GetThread()) {
			kind += "+paused"
		}
		h.faults.add(kind, 1)
		sys.Sleep(ctx, d)
	}
}

// action is a fault to carry out later, on the test goroutine.
type action struct {
	at time.Time
	do func()
}

// runFaults injects the timed faults on the test goroutine until the fault
// phase ends (or, for the mutation check, the audit finds a violation).
// Stalls and post faults run meanwhile in the runners and posters.
func (h *harness) runFaults() {
	end := time.Now().Add(h.cfg.faults)
	mid := time.Now().Add(h.cfg.faults / 2)
	var later []action
	nodeRestarted := false
	lastAudit := time.Now()
	for time.Now().Before(end) {
		time.Sleep(h.rng.dur(h.cfg.tick)) // the gap between faults
		later = h.runDue(later)
		if h.cluster != nil && h.cfg.nodeRestart && !nodeRestarted && time.Now().After(mid) {
			nodeRestarted = true
			later = append(later, h.stopNode())
			continue
		}
		if h.cfg.stopOnViolation && time.Since(h.start) > h.cfg.minFaults && time.Since(lastAudit) > 2*time.Second {
			lastAudit = time.Now()
			if n := staleDamage(h.audit(h.readLog())); n > 0 {
				h.t.Logf("%s: the audit found %d I1/I3 violations after %s; ending the fault phase", h.cfg.name, n, time.Since(h.start).Round(time.Millisecond))
				return
			}
		}
		// With leaves on, a short phase gets a leave and a kill for sure.
		if h.cfg.wLeave > 0 && h.faults.get("leave") == 0 && time.Now().After(end.Add(-2*h.cfg.faults/3)) {
			if a, ok := h.leaveOne(); ok {
				later = append(later, a)
			}
			continue
		}
		if h.cfg.wLeave > 0 && h.faults.get("kill") == 0 && time.Now().After(end.Add(-h.cfg.faults/3)) {
			if a, ok := h.killOne(); ok {
				later = append(later, a)
			}
			continue
		}
		switch h.rng.pick(h.cfg.wKill, h.cfg.wKick, h.cfg.wSkew, h.cfg.wStepDown, h.cfg.wLeave) {
		case 0:
			if a, ok := h.killOne(); ok {
				later = append(later, a)
			}
		case 1:
			h.kickOne()
		case 2:
			h.skewOne()
		case 3:
			h.stepDown()
		case 4:
			if a, ok := h.leaveOne(); ok {
				later = append(later, a)
			}
		}
	}
	for _, a := range later {
		a.do() // restart what is still down
	}
}

func (h *harness) runDue(later []action) []action {
	var rest []action
	for _, a := range later {
		if time.Now().After(a.at) {
			a.do()
		} else {
			rest = append(rest, a)
		}
	}
	return rest
}

// killOne crashes a random running runner, if enough stay up, and returns
// its restart: after a pause, with the same id or a new one, and a new clock.
func (h *harness) killOne() (action, bool) {
	var live []*slot
	for _, sl := range h.slots {
		if sl.up() {
			live = append(live, sl)
		}
	}
	if len(live) <= h.cfg.minLive {
		return action{}, false
	}
	sl := live[h.rng.intN(len(live))]
	sl.mu.Lock()
	id := sl.id
	sl.mu.Unlock()
	sl.kill()
	h.faults.add("kill", 1)
	if !h.rng.chance(0.5) {
		id = "" // a new id
	}
	down := h.rng.scaled(h.cfg.ttl, [2]float64{0.3, 3})
	skew := h.drawSkew()
	return action{at: time.Now().Add(down), do: func() {
		if sl.up() {
			return
		}
		sl.skew.Store(int64(skew))
		sl.startRunner(id)
		h.faults.add("restart", 1)
	}}, true
}

// leaveOne stops a random running runner gracefully, if enough stay up:
// with partitions it hands them over first. The stop runs aside, as a
// stalled append may hold it up to its deadline; the returned join starts
// a runner with a new id in the slot once the stop returned.
func (h *harness) leaveOne() (action, bool) {
	var live []*slot
	for _, sl := range h.slots {
		if sl.up() {
			live = append(live, sl)
		}
	}
	if len(live) <= h.cfg.minLive {
		return action{}, false
	}
	sl := live[h.rng.intN(len(live))]
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := sl.stop(ctx); err != nil {
			h.faults.add("leave_killed_at_deadline", 1) // a stall outlived the stop's deadline
		}
	}()
	h.faults.add("leave", 1)
	down := h.rng.scaled(h.cfg.ttl, [2]float64{0.3, 3})
	return action{at: time.Now().Add(down), do: func() {
		<-stopped // bounded by the stop's deadline
		if sl.up() {
			return
		}
		sl.startRunner("")
		h.faults.add("join", 1)
	}}, true
}

// kickOne drops a runner's, the posters' or an HTTP front's connection
// server-side.
func (h *harness) kickOne() {
	i := h.rng.intN(len(h.slots) + 1 + len(h.fronts))
	if i > len(h.slots) {
		if h.kickFront(h.fronts[i-len(h.slots)-1]) {
			h.faults.add("disconnect:http", 1)
		}
		return
	}
	nc := h.posterNC
	if i < len(h.slots) {
		nc = h.slots[i].conn()
	}
	if h.kick(nc) {
		h.faults.add("disconnect", 1)
	}
}

func (h *harness) drawSkew() time.Duration {
	s := h.cfg.skews[h.rng.intN(len(h.cfg.skews))]
	return time.Duration(s * float64(h.cfg.ttl))
}

// skewOne moves a runner's clock, in its runner and its store at once.
func (h *harness) skewOne() {
	sl := h.slots[h.rng.intN(len(h.slots))]
	sl.skew.Store(int64(h.drawSkew()))
	h.faults.add("clock_skew", 1)
}

// stepDown asks a thread stream's leader (of a random partition), or now
// and then the lease bucket's, to step down.
func (h *harness) stepDown() {
	stream, kind := h.anyStream(), "stepdown:stream"
	if h.rng.chance(0.3) {
		stream, kind = "KV_"+natsstore.DefaultBucket, "stepdown:kv"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := natsembedtest.StepDownStream(ctx, h.adminNC, stream); err != nil {
		h.stats.add(kind+"_failed", 1)
		return
	}
	h.faults.add(kind, 1)
}

// anyStream draws a partition stream; at P = 1 it draws nothing, so the
// seeds of the single-stream runs keep their schedules.
func (h *harness) anyStream() string {
	streams := h.streams()
	if len(streams) == 1 {
		return streams[0]
	}
	return streams[h.rng.intN(len(streams))]
}

// stopNode stops a cluster node, half the time a thread stream's leader
// (of a random partition), and returns its restart a few seconds later.
func (h *harness) stopNode() action {
	c := h.cluster
	i := h.rng.intN(len(c.Nodes))
	if h.rng.chance(0.5) {
		if l := c.StreamLeader(h.anyStream()); l != nil {
			for j, n := range c.Nodes {
				if n == l {
					i = j
				}
			}
		}
	}
	c.Stop(i)
	h.faults.add("node_stop", 1)
	down := h.rng.dur([2]time.Duration{2 * time.Second, 5 * time.Second})
	return action{at: time.Now().Add(down), do: func() {
		if c.Nodes[i] == nil {
			c.Restart(i)
			h.faults.add("node_restart", 1)
		}
	}}
}
