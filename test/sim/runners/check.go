package runners

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	artrunner "github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/projections"
)

// catchUp brings the checker's copy of the log up to date: the audit, the
// folds, and the work queue, which holds every post that landed.
func (w *world) catchUp() {
	for _, env := range w.readNew() {
		if env.Seq != uint64(len(w.envs))+1 {
			panic(fmt.Sprintf("runners: sequence %d after %d", env.Seq, len(w.envs)))
		}
		w.envs = append(w.envs, env)
		if why := eventstest.Misplaced(w.subj, env); why != "" {
			w.fail(CheckLayout, why)
		}
		w.auditor.Add(env)
		w.folds[env.Thread].Apply(env)
		if env.Type == events.TypeMessagePosted && w.work {
			w.queue = append(w.queue, &wqItem{seq: env.Seq, thread: env.Thread})
		}
	}
}

// check audits what the step wrote and reports whether a check broke. The
// auditor is a stream checker: this is the verdict of auditing the whole
// log after every step.
func (w *world) check() bool {
	w.catchUp()
	w.pollWatches()
	r := w.auditor.Report()
	for _, v := range r.Violations[w.nViol:] {
		w.fail(v.Check, fmt.Sprintf("%s: seqs %v: %s", v.Check, v.Seqs, v.Message))
	}
	w.nViol = len(r.Violations)
	return w.res.Failed()
}

// Bound is the runners' promise (runner.ConsumeBound) for the simulated
// runners' TTL and the work queue's ack wait.
var Bound = artrunner.ConsumeBound(TTL, AckWait)

// drain stops the faults: frozen runners thaw, writes in flight land, the
// client's unacknowledged posts are retried until acknowledged, and one
// runner joins if none is alive. Then the runners work, time passing only
// when nothing is left to do at once, until every message is consumed,
// and each must be within Bound of the later of the end of the faults and
// its post.
func (w *world) drain() {
	w.noFaults = true
	for _, r := range w.runners {
		if r.state == frozen {
			w.thaw(r)
		}
	}
	for len(w.zombies) > 0 {
		o := w.zombies[0]
		w.zombies = w.zombies[1:]
		w.exec(nil, o)
	}
	for len(w.posts.unacked) > 0 {
		w.repost()
	}
	if !w.anyAlive() {
		w.join()
	}
	if w.check() {
		return
	}
	w.calm = w.now()
	from := uint64(len(w.envs))
	deadline := w.calm.Add(Bound + 4*TTL)
	w.tracef("faults stop; the bound is %s", Bound)
	for n := 0; ; n++ {
		if w.settled() {
			break
		}
		if n > 20000 {
			w.fail(CheckLiveness, fmt.Sprintf("not settled after %d actions with no faults (a cycle?): %s", n, w.pending()))
			return
		}
		w.opts = w.opts[:0]
		add := func(weight int, do func()) { w.opts = append(w.opts, option{weight, do}) }
		for _, r := range w.runners {
			if r.state == alive {
				w.runnerActions(r, add)
			}
		}
		if w.work && w.deliverable() != nil {
			add(8, w.deliverWake)
		}
		if len(w.opts) > 0 {
			w.pick()
		} else {
			next := w.nextDue()
			if next.IsZero() || next.After(deadline) {
				w.fail(CheckLiveness, fmt.Sprintf("%s after the faults stopped, nothing left to do, and %s", w.now().Sub(w.calm), w.pending()))
				return
			}
			w.advanceTo(next)
		}
		w.res.Stats.Drained++
		if w.check() {
			return
		}
	}
	w.verifyBound(from)
}

func (w *world) anyAlive() bool {
	for _, r := range w.runners {
		if r.state == alive {
			return true
		}
	}
	return false
}

// settled reports whether every message in the log is consumed and no
// run is active.
func (w *world) settled() bool {
	for _, th := range w.threads {
		f := w.folds[th]
		if f.ActiveRun != nil || len(f.Pending()) > 0 {
			return false
		}
	}
	return true
}

// pending describes what is not settled.
func (w *world) pending() string { return sessionRE.ReplaceAllString(w.pendingRaw(), "$1") }

var sessionRE = regexp.MustCompile(`(s[0-9]+)-[0-9a-f]{16}`)

func (w *world) pendingRaw() string {
	var parts []string
	for _, th := range w.threads {
		f := w.folds[th]
		for _, m := range f.Pending() {
			parts = append(parts, fmt.Sprintf("%s message %d (%s) pending since %s", th, m.Seq, m.MessageID, w.postedAt(m).Sub(w.calm)))
		}
		if f.ActiveRun != nil {
			parts = append(parts, fmt.Sprintf("%s run %s active", th, f.ActiveRun.ID))
		}
	}
	for _, r := range w.runners {
		if r.state == alive {
			parts = append(parts, fmt.Sprintf("%s: %v", r.name, r.s.Describe(w.threads, r.follow)))
		}
	}
	return strings.Join(parts, "; ")
}

// verifyBound checks each message consumed after from (the log's end when
// the faults stopped): it was consumed within Bound of the later of the
// end of the faults and its post.
func (w *world) verifyBound(from uint64) {
	for _, th := range w.threads {
		for _, m := range w.folds[th].Messages {
			c := m.Consumed
			if c == nil || c.Seq <= from {
				continue
			}
			w.res.Stats.Consumed++
			start := later(w.calm, w.postedAt(m))
			at := w.envs[c.Seq-1].Event.GetTime().AsTime()
			if wait := at.Sub(start); wait > Bound {
				w.fail(CheckBound, fmt.Sprintf("%s message %d consumed at seq %d, %s after the faults stopped or its post; the bound is %s",
					th, m.Seq, c.Seq, wait, Bound))
				return
			}
		}
	}
}

// postedAt is when m was posted by the simulated clock: the time its poster
// stamped. The fold's Posted is the server's timestamp, which on natsstore
// is the real clock.
func (w *world) postedAt(m projections.Message) time.Time {
	return w.envs[m.Seq-1].Event.GetTime().AsTime()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
