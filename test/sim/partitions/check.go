package partitions

import (
	"fmt"
	"slices"

	"github.com/artifactr/artifactr/actors/runner/owner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/audit"
)

// catchUp reads the log's new events: the audit, the folds, and the
// follows of the runners that follow each post's partition.
func (w *world) catchUp() {
	for {
		env, err := w.tail.Next(w.done)
		if err != nil {
			return // nothing more for now
		}
		w.events++
		if why := eventstest.Misplaced(w.subj, env); why != "" {
			w.fail(CheckLayout, why)
		}
		w.auditor.Add(env)
		th := env.Thread
		f := w.folds[th]
		if f == nil {
			if env.Type != events.TypeMessagePosted {
				panic(fmt.Sprintf("partitions: %s before a post to %s", env.Type, th))
			}
			f = projections.New(th)
			w.folds[th] = f
			p := events.Partition(th, w.cfg.Partitions)
			w.byPart[p] = append(w.byPart[p], th)
		}
		f.Apply(env)
		if _, pending := f.OldestPending(); pending || f.ActiveRun != nil {
			w.unsettled[th] = struct{}{}
		} else {
			delete(w.unsettled, th)
		}
		switch env.Type {
		case events.TypeMessagePosted:
			w.postedAt[env.Seq] = env.Event.GetTime().AsTime()
			p := events.Partition(th, w.cfg.Partitions)
			for _, r := range w.runners {
				if r.state != gone && r.core.Follows(p) {
					w.routed(r, th, env.Seq)
				}
			}
		case events.TypeRunStarted:
			w.consumed(env)
		}
	}
}

// consumed records a message's consumption, and its wait when it came
// after the faults stopped.
func (w *world) consumed(env events.Envelope) {
	w.res.Figures.Consumed++
	prompt := env.Event.GetRunStarted().GetPromptSeq()
	posted, ok := w.postedAt[prompt]
	if !ok {
		return // consumed twice: the audit's I1 says so
	}
	delete(w.postedAt, prompt)
	if w.calm.IsZero() {
		return
	}
	start := w.calm
	if posted.After(start) {
		start = posted
	}
	lag := env.Event.GetTime().AsTime().Sub(start)
	w.res.Figures.MaxLag = max(w.res.Figures.MaxLag, lag)
	if lag > Bound {
		w.fail(CheckExactlyOnce, fmt.Sprintf("%s message %d consumed %s after the faults stopped or its post; the bound is %s", env.Thread, prompt, lag, Bound))
	}
}

// watchSessions reads the lease watch's new session changes and hands the
// live set, when it changed, to every runner's core (through its inbox:
// each sees it at its own pace, as its own watch would deliver it).
func (w *world) watchSessions() {
	changed := false
	for {
		u, err := w.watch.Next(w.done)
		if err != nil {
			break
		}
		if u.Thread != "" || u.CaughtUp || u.Session == "" {
			continue
		}
		if u.Present != w.live[u.Session] {
			changed = true
		}
		if u.Present {
			w.live[u.Session] = true
		} else {
			delete(w.live, u.Session)
		}
	}
	if !changed {
		return
	}
	before, rBefore := w.lastAssign, w.lastR
	w.lastAssign, w.lastR = w.assign(), len(w.live)
	if before != nil {
		fg := &w.res.Figures
		fg.Changes++
		fg.Moved = append(fg.Moved, owner.Moved(before, w.lastAssign))
		fg.Least = append(fg.Least, float64(w.cfg.Partitions)/float64(max(rBefore, w.lastR, 1)))
		fg.Grew = append(fg.Grew, w.lastR > rBefore)
	}
	live := make([]string, 0, len(w.live))
	for s := range w.live {
		live = append(live, s)
	}
	slices.Sort(live)
	for _, r := range w.runners {
		if r.state != gone {
			r.inbox = append(r.inbox, owner.Members{Live: live})
		}
	}
}

// check audits what the step wrote and reports whether a check broke.
func (w *world) check() bool {
	w.catchUp()
	w.watchSessions()
	if r := w.auditor.Report(); r.ViolationCount > w.nViol {
		for _, v := range r.Violations[min(w.nViol, len(r.Violations)):] {
			w.fail(v.Check, fmt.Sprintf("%s: seqs %v: %s", v.Check, v.Seqs, v.Message))
		}
		w.nViol = r.ViolationCount
	}
	return w.res.Failed()
}

// drain stops the faults: frozen runners thaw and no more posts come.
// Then the runners work, time passing only when nothing is left to do at
// once, until every post is consumed and ownership has settled.
func (w *world) drain() {
	w.noFaults = true
	for _, r := range w.runners {
		if r.state == frozen_ {
			w.thaw(r)
		}
	}
	w.calm = w.now()
	w.tracef("faults stop")
	deadline := w.calm.Add(Bound + 2*TTL)
	for n := 0; ; n++ {
		if w.check() {
			return
		}
		if w.settled() {
			break
		}
		if n > 50*w.cfg.Posts+100000 {
			w.fail(w.unsettledCheck(), fmt.Sprintf("not settled after %d actions with no faults: %s", n, w.pending()))
			return
		}
		w.opts = w.opts[:0]
		add := func(weight int, do func()) { w.opts = append(w.opts, option{weight, do}) }
		for _, r := range w.runners {
			if r.state == alive {
				w.runnerActions(r, add)
			}
		}
		if len(w.opts) > 0 {
			w.pick()
			continue
		}
		next := w.nextDue()
		if next.IsZero() || next.After(deadline) {
			w.fail(w.unsettledCheck(), fmt.Sprintf("%s after the faults stopped, nothing left to do: %s", w.now().Sub(w.calm), w.pending()))
			return
		}
		w.advanceTo(next)
	}
	w.res.Figures.Settle = w.now().Sub(w.calm)
	w.verify()
}

// unsettledCheck names the check a run that does not settle breaks.
func (w *world) unsettledCheck() string {
	if len(w.unsettled) > 0 {
		return CheckExactlyOnce
	}
	return CheckOwnership
}

// settled reports whether every post is consumed, no run is active, and
// every live runner's core has the partitions the assignment gives it.
func (w *world) settled() bool {
	if len(w.unsettled) > 0 {
		return false
	}
	return w.ownership() == nil
}

// ownership checks that each partition is owned by exactly one live
// runner, the one the assignment of the live sessions gives it to, and
// that its lease names that runner's session.
func (w *world) ownership() error {
	target := w.assign()
	ls, err := w.reader.(events.PartitionLeaser).PartitionLeases(w.ctx, w.cfg.Partitions)
	if err != nil {
		return err
	}
	owners := make([][]string, w.cfg.Partitions)
	for _, r := range w.runners {
		if r.state != alive {
			continue
		}
		if !w.live[r.sess.ID] {
			return fmt.Errorf("%s's session %s is not live", r.name, r.sess.ID)
		}
		for _, p := range r.core.Owned() {
			owners[p] = append(owners[p], r.sess.ID)
		}
	}
	for p, os := range owners {
		if len(os) != 1 || os[0] != target[p] || ls[p].Session != os[0] || !ls[p].Live {
			return fmt.Errorf("partition %d: owned by %v, lease %s (live %v), assigned to %s", p, os, ls[p].Session, ls[p].Live, target[p])
		}
	}
	return nil
}

// verify checks, once settled, exactly-once and the balance.
func (w *world) verify() {
	fg := &w.res.Figures
	if fg.Consumed != fg.Posts {
		w.fail(CheckExactlyOnce, fmt.Sprintf("%d posts acknowledged, %d runs started", fg.Posts, fg.Consumed))
		return
	}
	if err := w.ownership(); err != nil {
		w.fail(CheckOwnership, err.Error())
		return
	}
	var owned []int
	for _, r := range w.runners {
		if r.state == alive {
			owned = append(owned, len(r.core.Owned()))
		}
	}
	P, R := w.cfg.Partitions, len(owned)
	mean := float64(P) / float64(R)
	fg.Owned, fg.Balance = owned, float64(slices.Max(owned))/mean
	fg.BalanceBound = float64((P+R-1)/R) / mean
	if fg.Balance > fg.BalanceBound+1e-9 {
		w.fail(CheckOwnership, fmt.Sprintf("max/mean %.3f over the bound %.3f: %v", fg.Balance, fg.BalanceBound, owned))
	}
}

// pending describes what is not settled.
func (w *world) pending() string {
	var out []string
	for th := range w.unsettled {
		f := w.folds[th]
		m, _ := f.OldestPending()
		out = append(out, fmt.Sprintf("%s (partition %d) pending %d, active %v", th, events.Partition(th, w.cfg.Partitions), m.Seq, f.ActiveRun != nil))
		if len(out) == 5 {
			break
		}
	}
	slices.Sort(out)
	s := fmt.Sprintf("%d threads unsettled %v", len(w.unsettled), out)
	if err := w.ownership(); err != nil {
		s += "; ownership: " + err.Error()
	}
	for _, r := range w.runners {
		if r.state == alive {
			s += fmt.Sprintf("; %s owns %v, inbox %d, queue %d, threads %d", r.name, r.core.Owned(), len(r.inbox), len(r.queue), len(r.order))
		}
	}
	return s
}

// Safety reports whether check is one the fence exists for.
func Safety(check string) bool { return check == audit.CheckI1 || check == audit.CheckI3 }
