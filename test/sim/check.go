package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/projections/audit"
)

// check brings the checker's copy of the log up to date, auditing and
// folding the new events, and reports whether a fatal check broke. The
// auditor is a stream checker, so auditing the new events after every step
// gives the verdict of auditing the whole log after every step; Run
// re-audits the whole log from scratch at the end (CheckReplay).
func (w *world) check() bool {
	if !w.wroteSinceCheck() {
		return w.res.Failed()
	}
	envs, err := w.reader.Load(w.ctx, threadID, w.last+1)
	if err != nil {
		return w.storeFailed("the checker's load", err)
	}
	for _, e := range envs {
		if e.Seq != uint64(len(w.envs))+1 {
			panic(fmt.Sprintf("sim: sequence %d after %d: the log has another thread", e.Seq, len(w.envs)))
		}
		w.envs = append(w.envs, e)
		w.last = e.Seq
		if why := eventstest.Misplaced(w.subj, e); why != "" {
			w.fail(CheckLayout, why)
		}
		w.auditor.Add(e)
		w.fold.Apply(e)
	}
	if len(envs) > 0 {
		r := w.auditor.Report()
		for _, v := range r.Violations[w.nViol:] {
			w.fail(v.Check, violation(v))
		}
		w.nViol = len(r.Violations)
	}
	return w.res.Failed()
}

func violation(v audit.Violation) string {
	return fmt.Sprintf("%s: seqs %v: %s", v.Check, v.Seqs, v.Message)
}

// drain ends a run: faults stop, every zombie write lands or is refused,
// every process crashes, every post is retried until acknowledged, and one
// process claims the thread and works until nothing is pending. Then every
// posted message must have been consumed exactly once.
func (w *world) drain() {
	w.noFaults = true
	w.tracef("drain: %d zombie writes, %d unacknowledged posts", len(w.zombies), len(w.posts.unacked))
	for len(w.zombies) > 0 {
		w.exec(w.zombies[0])
		w.zombies = w.zombies[1:]
		if w.check() {
			return
		}
	}
	for _, p := range w.procs {
		p.out = nil
		w.stopCore(p)
	}
	for len(w.posts.unacked) > 0 {
		id := w.posts.unacked[0]
		w.posts.unacked = w.posts.unacked[1:]
		w.postOnce(id)
	}
	if w.check() {
		return
	}
	p := w.procs[0]
	latest := p.clock.Now()
	for _, q := range w.procs {
		latest = later(latest, q.clock.Now())
	}
	calm, from := latest, w.last // the faults stopped, by the latest clock
	// The leases lapse, and a runner looks at the thread again.
	p.clock.Advance(latest.Sub(p.clock.Now()) + 2*TTL)
	w.claim(p)
	if w.check() {
		return
	}
	if p.core == nil {
		w.fail(CheckDrain, "the drainer could not claim the thread")
		return
	}
	if !w.work(p) {
		return
	}
	posted, ok := w.racedRelease(p)
	if !ok {
		return
	}
	w.verifyDrained()
	w.verifyBound(calm, from, posted)
}

// racedRelease is issue 21's interleaving, with no faults: a post lands
// after the drainer's load and before it releases the thread as idle, so its
// view never holds the post. The release's re-check, the shell's rule
// (runner's threadactor.release reads the posted subject's last sequence
// once the release is stored), must see it, and the drainer claims again
// at once and consumes it. It returns the post's sequence and the time it
// was posted, on the drainer's clock; none when the drainer's core never
// releases as idle.
func (w *world) racedRelease(p *proc) (map[uint64]time.Time, bool) {
	if w.coreCf.IdleTicks == 0 {
		return nil, true
	}
	v := p.core.View()
	seen := v.LastPostedSubjectSeq
	w.post()
	if w.check() {
		return nil, false
	}
	posted := map[uint64]time.Time{w.last: p.clock.Now()}
	for range w.coreCf.IdleTicks {
		if p.core != nil {
			w.tick(p)
		}
	}
	if p.core != nil {
		w.fail(CheckDrain, fmt.Sprintf("the drainer %s did not release the idle thread after %d ticks", p.holder, w.coreCf.IdleTicks))
		return nil, false
	}
	for len(w.zombies) > 0 { // the release lands
		w.exec(w.zombies[0])
		w.zombies = w.zombies[1:]
	}
	if w.check() {
		return nil, false
	}
	last, err := p.store.LastSeq(w.ctx, threadID, events.KindPosted)
	if err != nil {
		w.storeFailed("the release's re-check", err)
		return nil, false
	}
	w.tracef("p%d release re-check: last post %d, its view had %d", p.id, last, seen)
	if last <= seen {
		w.fail(CheckDrain, fmt.Sprintf("the release's re-check found no post after %d, but %d is pending", seen, w.last))
		return nil, false
	}
	w.claim(p)
	if w.check() {
		return nil, false
	}
	if p.core == nil {
		w.fail(CheckDrain, "the drainer could not claim the thread again after its release")
		return nil, false
	}
	return posted, w.work(p)
}

// verifyBound checks the runners' promise on the drained log: each message
// consumed after from (the log's end when the faults stopped at calm) was
// consumed, on the drainer's clock, within runner.ConsumeBound of the later
// of calm and its post (posted has the drain's own posts).
func (w *world) verifyBound(calm time.Time, from uint64, posted map[uint64]time.Time) {
	bound := runner.ConsumeBound(TTL, natsstore.WorkAckWait)
	for _, m := range w.fold.Messages {
		c := m.Consumed
		if c == nil || c.Seq <= from {
			continue
		}
		start := later(calm, posted[m.Seq])
		at := w.envs[c.Seq-1].Event.GetTime().AsTime()
		if wait := at.Sub(start); wait > bound {
			w.fail(CheckBound, fmt.Sprintf("message %d consumed at seq %d, %s after the faults stopped or its post; the bound is %s", m.Seq, c.Seq, wait, bound))
			return
		}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// work runs p's core with no faults until it has nothing left to do: its
// I/O, its results, the log's new events, and its runs, which complete.
func (w *world) work(p *proc) bool {
	bound := 100 * (len(w.envs) + 10)
	for range bound {
		switch {
		case p.core == nil:
			w.fail(CheckDrain, fmt.Sprintf("the drainer %s stopped with work left", p.holder))
			return false
		case len(p.out) > 0:
			w.doEffect(p)
		case len(p.inbox) > 0:
			w.input(p)
		case p.cursor < w.last:
			w.observe(p)
		case len(p.runs) > 0:
			r := p.runs[0]
			p.runs = p.runs[1:]
			w.decide(p, runFinished(r))
		default:
			return true
		}
		w.res.Stats.Drained++
		if w.check() {
			return false
		}
	}
	w.fail(CheckDrain, fmt.Sprintf("the drainer did not finish in %d actions", bound))
	return false
}

// verifyDrained checks the drained log: every post consumed, every
// acknowledged post at the sequence it was acknowledged with, no run
// active, and the whole log audited from scratch agrees with the audit
// kept up step by step.
func (w *world) verifyDrained() {
	var missed []string
	for _, m := range w.fold.Messages {
		if m.Consumed == nil {
			missed = append(missed, fmt.Sprintf("%d (%s)", m.Seq, m.MessageID))
		}
	}
	for _, id := range w.posts.ids {
		seq, ok := w.posts.acked[id]
		if m := w.message(seq); !ok || m == nil || m.MessageID != id {
			missed = append(missed, fmt.Sprintf("post %s acknowledged at %d, not in the log there", id, seq))
		}
	}
	if len(missed) > 0 {
		w.fail(CheckDrain, "not consumed after the drain: "+strings.Join(missed, ", "))
	}
	byID := map[string]uint64{}
	for _, m := range w.fold.Messages {
		if prev, ok := byID[m.MessageID]; ok {
			w.fail(CheckRepostNoMessage, fmt.Sprintf("messages %d and %d have one message id %q", prev, m.Seq, m.MessageID))
		}
		byID[m.MessageID] = m.Seq
	}
	for _, r := range w.fold.Runs {
		if orig, ok := w.fold.Reposts[r.PromptSeq]; ok {
			w.fail(CheckRepostNoMessage, fmt.Sprintf("run %s took %d, a repost of message %d's id, as its prompt", r.ID, r.PromptSeq, orig))
		}
	}
	if r := w.fold.ActiveRun; r != nil {
		w.fail(CheckDrain, fmt.Sprintf("run %s still active after the drain", r.ID))
	}
	envs, err := w.reader.Load(w.ctx, threadID, 1)
	if err != nil {
		w.storeFailed("the checker's load of the whole log", err)
		return
	}
	a := w.newAuditor()
	for _, e := range envs {
		a.Add(e)
	}
	whole, kept := a.Report(), w.auditor.Report()
	if whole.ViolationCount != kept.ViolationCount || whole.Events != kept.Events {
		w.fail(CheckReplay, fmt.Sprintf("whole-log audit: %d events, %d violations; step by step: %d events, %d violations",
			whole.Events, whole.ViolationCount, kept.Events, kept.ViolationCount))
	}
	w.tracef("drained: %d events, %d messages all consumed", len(w.envs), len(w.fold.Messages))
}
