package runners

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/artifactr/artifactr/actors/runner/sched"
	"github.com/artifactr/artifactr/actors/thread"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections"
)

type opKind uint8

const (
	opPeek opKind = iota
	opClaim
	opAck
	opAppend
	opSync
	opRelease
	opTerminate // an actor's stop, reported to the scheduler as Terminated
)

var opNames = [...]string{"peek", "claim", "ack", "append", "sync", "release", "stop"}

// op is I/O a runner carries out off its loop: sent (carried out against
// the store) at one step, reported to the scheduler or the actor at the
// same step or a later one. A zombie is an op of a dead runner that still
// lands; its report goes nowhere.
type op struct {
	kind   opKind
	thread string
	claim  sched.Claim
	holder string
	ack    func()
	actor  *actor
	app    thread.Append
	rel    thread.Release // a release's, as the core decided it

	st           events.Store // the runner's handle
	sent, zombie bool
	ev           sched.Event // the scheduler's report
	cd           *sched.ClaimDone
	in           thread.Input // the actor's report
}

// actor is a thread actor: a claim and its core, its agent's runs, its
// idle timer (threadActor in actors/runner).
type actor struct {
	thread   string
	claim    events.Claim
	core     *thread.Core
	runs     []*run
	idleAt   time.Time
	stopping bool
	fate     sched.Terminated
}

type run struct {
	id        string
	asked     int
	cancelled bool
}

var leaseLost = thread.LeaseLost{Err: errors.New("the runner's session was lost")}

// send carries out o against the store.
func (w *world) send(r *runner, o *op) {
	w.exec(r, o)
	if o.kind == opAck {
		r.ops = slices.DeleteFunc(r.ops, func(x *op) bool { return x == o })
		return
	}
	o.sent = true
	if w.rng.IntN(2) == 0 {
		w.report(r, o)
		return
	}
	if (o.kind == opPeek || o.kind == opClaim) && w.step > w.cfg.Steps*3/4 && !w.noFaults && w.rng.IntN(3) == 0 {
		// A post lands after the read of a peek or claim in flight, and
		// its wake-up may come before the read is reported (7c5de4e): in
		// the last quarter, where no later post saves it.
		w.tracef("a post races %s's %s of %s", r.name, opNames[o.kind], o.thread)
		if seq, ok := w.postTo(o.thread); ok && w.work && w.rng.IntN(2) == 0 {
			w.catchUp()
			if it := w.queued(seq); it != nil {
				w.deliverTo(r, it)
			}
		}
	}
}

// doZombie lands a dead runner's write.
func (w *world) doZombie() {
	i := w.rng.IntN(len(w.zombies))
	o := w.zombies[i]
	w.zombies = append(w.zombies[:i], w.zombies[i+1:]...)
	w.exec(nil, o)
}

func (w *world) exec(r *runner, o *op) {
	name := "zombie"
	st := o.st
	if r != nil {
		name = r.name
	}
	switch o.kind {
	case opPeek:
		w.res.Stats.Peeks++
		work, err := w.peek(st, o.thread)
		o.ev = sched.PeekDone{Thread: o.thread, Work: work, Err: err}
		w.tracef("%s peek %s -> work %v, %v", name, o.thread, work, errOK(err))
	case opClaim:
		w.claim(r, st, o)
		w.tracef("%s claim %s as %s -> %s", name, o.thread, o.holder, claimOutcome(o.cd))
	case opAck:
		o.ack()
	case opAppend:
		ack, err := w.write(r, st, "append", func() (events.Ack, error) {
			return st.Append(w.ctx, o.app.Event, o.app.Check, events.WithMsgID(o.app.MsgID))
		})
		w.res.Stats.Appends++
		if errors.Is(err, events.ErrThreadBusy) {
			w.res.Stats.Fenced++
		}
		o.in = thread.AppendDone{Ack: ack, Err: err}
		w.tracef("%s append %s %s -> %s", name, o.thread, describe(o.app.Event), outcome(ack, err))
	case opSync:
		last, err := events.ThreadLastSeq(w.ctx, st, o.thread)
		if err != nil {
			w.fail(CheckStore, fmt.Sprintf("sync of %s: %v", o.thread, err))
		}
		o.in = thread.Synced{LastSeq: last}
	case opRelease:
		w.release(r, st, o)
		w.tracef("%s release %s claim %d (%s) -> %+v", name, o.thread, o.actor.claim.Seq, o.rel.Reason, o.actor.fate)
	case opTerminate:
	}
}

// write runs one write with a drawn fault.
func (w *world) write(r *runner, st events.Store, kind string, do func() (events.Ack, error)) (events.Ack, error) {
	if r != nil {
		r.faults = faults{op: kind, f: w.writeFault()}
		defer func() { r.faults = faults{} }()
	}
	return do()
}

// peek is storage.go's peek: a read of the thread for work.
func (w *world) peek(st events.Store, th string) (bool, error) {
	if !w.noFaults && w.rng.IntN(20) == 0 {
		return false, fmt.Errorf("%w: peek timed out", events.ErrUnavailable)
	}
	envs, err := st.Load(w.ctx, th, 1)
	if err != nil {
		return false, err
	}
	v := projections.New(th)
	for _, env := range envs {
		v.Apply(env)
	}
	return len(v.Pending()) > 0 || v.ActiveRun != nil, nil
}

// claim is storage.go's claim without snapshots: the session marker, then
// the load up to it, perhaps with a fault on the lease or the marker.
func (w *world) claim(r *runner, st events.Store, o *op) {
	if r != nil {
		kind := "append"
		if w.rng.IntN(3) == 0 {
			kind = "lease"
		}
		r.faults = faults{op: kind, f: w.writeFault()}
		defer func() { r.faults = faults{} }()
	}
	cd := &sched.ClaimDone{Thread: o.thread}
	c, err := events.AcquireSessionMarker(w.ctx, st, o.claim.Session, o.thread, o.holder, w.now())
	if err == nil {
		cd.Claim = c
		cd.History, err = events.LoadClaimed(w.ctx, st, c, 1)
		w.res.Stats.Claims++
	} else {
		w.res.Stats.ClaimErrs++
	}
	cd.Err = err
	o.cd, o.ev = cd, *cd
}

// release is threadActor.release's goroutine: the release, then the
// re-check of posts that came meanwhile, which the fate reports.
func (w *world) release(r *runner, st events.Store, o *op) {
	a := o.actor
	c := a.claim
	var err error
	func() {
		if r != nil {
			r.faults = faults{op: "append", f: w.writeFault()}
			defer func() { r.faults = faults{} }()
		}
		if o.rel.KeepLease {
			err = events.ReleaseMarkerAt(w.ctx, st, c, o.rel.RunSeq, o.rel.Reason, w.now())
		} else {
			err = events.ReleaseClaimAt(w.ctx, st, c, o.rel.RunSeq, o.rel.Reason, w.now())
		}
	}()
	w.res.Stats.Releases++
	switch {
	case err != nil:
		a.fate.Rework = true
	case o.rel.Reason != "shutdown":
		a.fate.Released = true
		last, lerr := st.LastSeq(w.ctx, c.Thread, events.KindPosted)
		if o.rel.Pending || lerr != nil || last > o.rel.LastPosted {
			a.fate.Rework = true
		}
		a.fate.Checked = max(last, o.rel.LastPosted)
	default:
		a.fate.Released = true
		a.fate.Checked = o.rel.LastPosted
	}
	if a.fate.Rework {
		w.res.Stats.Reworks++
	}
}

// report feeds o's result to the scheduler or to its actor.
func (w *world) report(r *runner, o *op) {
	r.ops = slices.DeleteFunc(r.ops, func(x *op) bool { return x == o })
	switch o.kind {
	case opPeek:
		w.step1(r, o.ev, nil)
	case opClaim:
		w.step1(r, o.ev, o.cd)
	case opAppend, opSync:
		if a := r.actors[o.thread]; a == o.actor && o.in != nil {
			w.decide(r, a, o.in)
		}
	case opRelease, opTerminate:
		if o.actor.fate.Rework && w.work && !w.noFaults && w.rng.IntN(3) == 0 {
			// The release-then-die window: the holder saw work come as
			// it released, and dies before it claims again.
			w.kill(r)
			return
		}
		if r.actors[o.thread] == o.actor {
			delete(r.actors, o.thread)
			t := o.actor.fate
			t.Thread = o.thread
			w.step1(r, t, nil)
		}
	}
}

// spawn starts the thread actor of a claim, as threadActor.started does.
func (w *world) spawn(r *runner, sp sched.Spawn, cd *sched.ClaimDone) sched.Spawned {
	w.res.Stats.Spawns++
	history := append(slices.Clone(cd.History), sp.Routed...) // the core skips what it holds
	a := &actor{thread: sp.Thread, claim: sp.Claim, core: thread.New(w.coreCf, sp.Claim, history)}
	r.actors[sp.Thread] = a
	w.tracef("%s spawns %s's actor for claim %d (probe %v, %d routed)", r.name, sp.Thread, sp.Claim.Seq, sp.Probe, len(sp.Routed))
	w.carry(r, a, a.core.Start())
	if sp.Probe {
		w.decide(r, a, thread.Tick{})
	}
	a.idleAt = w.now().Add(w.idle)
	return sched.Spawned{Spawn: sp}
}

// observe feeds a routed event to a, re-arming its idle timer.
func (w *world) observe(r *runner, a *actor, env events.Envelope) {
	w.decide(r, a, thread.Observed{Env: env})
	a.idleAt = w.now().Add(w.idle)
}

func (w *world) idleDue(r *runner, a *actor) {
	w.decide(r, a, thread.Tick{})
	a.idleAt = w.now().Add(w.idle)
}

// decide feeds in to a's core and carries out the Ready. It returns false
// when the actor is stopping or the core refused the input.
func (w *world) decide(r *runner, a *actor, in thread.Input) bool {
	if a.stopping {
		return false
	}
	rd, err := a.core.Decide(in)
	var rej *thread.RejectError
	switch {
	case errors.As(err, &rej) && isRunReport(in):
		w.carry(r, a, rd) // its Ready too (thread.Core.Decide)
		return false
	case err != nil:
		w.fail(CheckDecide, fmt.Sprintf("%s %s: Decide(%T): %v", r.name, a.thread, in, err))
		return false
	}
	w.carry(r, a, rd)
	return true
}

func isRunReport(in thread.Input) bool {
	switch in.(type) {
	case thread.RunOutput, thread.RunAsked, thread.RunSteer, thread.RunFinished:
		return true
	}
	return false
}

// carry carries out a core's Ready, as threadActor.exec does.
func (w *world) carry(r *runner, a *actor, rd thread.Ready) {
	if s := describeThreadReady(rd); s != "" {
		w.tracef("%s %s claim %d =>%s", r.name, a.thread, a.claim.Seq, s)
	}
	for _, id := range rd.Cancel {
		for _, x := range a.runs {
			if x.id == id {
				x.cancelled = true
			}
		}
	}
	for _, s := range rd.Start {
		w.res.Stats.Runs++
		w.handOut(r, a, s.RunID, s.Prompt.Seq, projections.ConsumedPrompt)
		a.runs = append(a.runs, &run{id: s.RunID})
	}
	for _, d := range rd.Deliver {
		kind := projections.ConsumedSteering
		if d.RequestID != "" {
			kind = projections.ConsumedAnswer
		} else {
			w.res.Stats.Steered++
		}
		w.handOut(r, a, d.RunID, d.Message.Seq, kind)
	}
	if ap := rd.Append; ap != nil {
		ev := proto.Clone(ap.Event).(*eventspb.Event)
		ev.Time = timestamppb.New(w.now())
		app := *ap
		app.Event = ev
		r.ops = append(r.ops, &op{kind: opAppend, thread: a.thread, actor: a, app: app, st: r.store})
	}
	if rd.Sync {
		r.ops = append(r.ops, &op{kind: opSync, thread: a.thread, actor: a, st: r.store})
	}
	if rd.Stop {
		w.stop(r, a, rd)
	}
}

// stop stops a: its runs are cancelled, its writes not yet sent are not
// sent, and it releases the claim first if its core asked.
func (w *world) stop(r *runner, a *actor, rd thread.Ready) {
	a.stopping, a.fate.Clean = true, true
	a.runs = nil
	r.ops = slices.DeleteFunc(r.ops, func(o *op) bool {
		return o.actor == a && !o.sent && (o.kind == opAppend || o.kind == opSync)
	})
	if rd.Release == nil {
		r.ops = append(r.ops, &op{kind: opTerminate, thread: a.thread, actor: a, sent: true})
		return
	}
	if !w.noFaults && w.rng.IntN(3) == 0 {
		// Issue 21's race: a post lands after the core's view and before
		// its release, whose re-check must see it; its wake-up may come
		// before the release lands.
		w.tracef("a post races %s's release of %s", r.name, a.thread)
		w.postTo(a.thread)
	}
	r.ops = append(r.ops, &op{kind: opRelease, thread: a.thread, actor: a, rel: *rd.Release, st: r.store})
}

// handOut checks a message handed to an agent: never twice, and only once
// the log holds the event that consumed it for that run.
func (w *world) handOut(r *runner, a *actor, runID string, seq uint64, kind projections.ConsumptionKind) {
	w.catchUp()
	to := fmt.Sprintf("%s of run %s (%s, claim %d)", kind, runID, r.name, a.claim.Seq)
	if prev, dup := w.handed[seq]; dup {
		w.fail(CheckHandedOutOnce, fmt.Sprintf("message %d handed out as %s, and before as %s", seq, to, prev))
		return
	}
	w.handed[seq] = to
	m := w.message(a.thread, seq)
	if m == nil || m.Consumed == nil || m.Consumed.RunID != runID || m.Consumed.Kind != kind {
		w.fail(CheckHandOutAfterLog, fmt.Sprintf("message %d handed out as %s, but the log does not have it so", seq, to))
	}
}

func (w *world) message(th string, seq uint64) *projections.Message {
	f := w.folds[th]
	for i := range f.Messages {
		if f.Messages[i].Seq == seq {
			return &f.Messages[i]
		}
	}
	return nil
}

// progress has the agent report on one of a's runs.
func (w *world) progress(r *runner, a *actor) {
	i := w.rng.IntN(len(a.runs))
	x := a.runs[i]
	var in thread.Input
	done := false
	switch n := w.rng.IntN(100); {
	case x.cancelled || n >= 80:
		err := errors.New("agent failed")
		if x.cancelled {
			err = context.Canceled
		}
		in, done = thread.RunFinished{RunID: x.id, Err: err}, true
	case n >= 55:
		in, done = thread.RunFinished{RunID: x.id, Output: "done"}, true
	case n >= 35:
		x.asked++
		in = thread.RunAsked{RunID: x.id, RequestID: fmt.Sprintf("%s/q%d", x.id, x.asked), Question: "?"}
	case n >= 20:
		in = thread.RunSteer{RunID: x.id}
	default:
		in = thread.RunOutput{RunID: x.id, Text: "out"}
	}
	w.tracef("%s %s agent of %s: %s", r.name, a.thread, x.id, describeInput(in))
	if !w.decide(r, a, in) || done {
		a.runs = slices.DeleteFunc(a.runs, func(y *run) bool { return y == x })
	}
}

// post posts a new message to a random thread.
func (w *world) post() { w.postTo(w.threads[w.rng.IntN(len(w.threads))]) }

// postTo posts a new message to th, and returns its sequence if acked.
func (w *world) postTo(th string) (uint64, bool) {
	w.posts.n++
	id := fmt.Sprintf("m%d", w.posts.n)
	w.posts.thread[id] = th
	w.postOnce(id)
	seq, ok := w.posts.acked[id]
	return seq, ok
}

func (w *world) repost() {
	i := w.rng.IntN(len(w.posts.unacked))
	id := w.posts.unacked[i]
	w.posts.unacked = append(w.posts.unacked[:i], w.posts.unacked[i+1:]...)
	w.postOnce(id)
}

func (w *world) postOnce(id string) {
	th := w.posts.thread[id]
	w.postFlt = faults{op: "post", f: w.writeFault()}
	ack, err := w.poster.Post(w.ctx, th, &eventspb.MessagePosted{MessageId: id, Author: "client", Text: "text of " + id})
	w.postFlt = faults{}
	if err != nil {
		w.posts.unacked = append(w.posts.unacked, id)
		w.tracef("post %s to %s -> %v", id, th, short(err))
		return
	}
	w.posts.acked[id] = ack.Seq
	w.tracef("post %s to %s -> seq %d", id, th, ack.Seq)
}
