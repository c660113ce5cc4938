package runners

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/artifactr/artifactr/actors/runner/sched"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/memstore"
)

type runState uint8

const (
	alive runState = iota
	frozen
	dead
)

// runner is one simulated runner process: a store handle, a session, a
// scheduler, its follow of the stream and its lease watch, the thread
// actors it holds and its I/O in flight. It mirrors actors/runner's shell:
// runnerActor.step (router.go), keepSession (runner.go) and threadActor.
type runner struct {
	id     int
	name   string
	state  runState
	store  events.Store // memstore's or natsstore's, with r.faults
	faults faults

	s       *sched.Scheduler
	sess    events.Session // keepSession's session; ID "" while it opens one
	renewAt time.Time      // keepSession's next renewal or open
	wake    time.Time      // the timer the last Ready armed
	follow  uint64         // the last sequence routed
	watch   events.LeaseWatch
	watchQ  []events.LeaseUpdate // delivered by the watch, not yet fed

	actors  map[string]*actor
	ops     []*op
	holders int
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// join starts a runner, as Runner.Start does: a session, a follow from the
// log's end, a lease watch and a scheduler.
func (w *world) join() {
	id := len(w.runners) + 1
	r := &runner{id: id, name: fmt.Sprintf("r%d", id), actors: map[string]*actor{}}
	r.store = w.openStore(&r.faults)
	if r.store == nil {
		return
	}
	w.res.Stats.Joins++
	sess, err := r.store.OpenSession(w.ctx, r.name, TTL)
	if err != nil {
		w.fail(CheckStore, fmt.Sprintf("%s opens a session: %v", r.name, err))
		return
	}
	r.sess = sess
	r.renewAt = w.now().Add(TTL / 3)
	r.follow = w.logLen()
	if r.watch, err = r.store.WatchLeases(w.ctx); err != nil {
		w.fail(CheckStore, fmt.Sprintf("%s watches leases: %v", r.name, err))
		return
	}
	r.s = sched.New(sched.Config{ClaimTTL: TTL, MaxClaiming: 1 + w.rng.IntN(4), Work: w.work, Seed: w.rng.Uint64(), Logger: quiet}, sess)
	w.runners = append(w.runners, r)
	w.tracef("%s joins with session %s, following from %d", r.name, w.sid(sess.ID), r.follow)
	w.pollWatches()
}

// freeze stops r for a while: it does nothing, renews nothing, and its
// session lapses once time passes its TTL.
func (w *world) freeze(r *runner) {
	r.state = frozen
	w.res.Stats.Freezes++
	w.tracef("%s freezes", r.name)
}

func (w *world) thaw(r *runner) {
	r.state = alive
	w.tracef("%s thaws", r.name)
}

// kill ends r as a crash does: its actors, runs and wake-ups are gone; of
// its I/O in flight, each is lost or, as if already sent, lands later.
func (w *world) kill(r *runner) {
	r.state = dead
	w.res.Stats.Kills++
	kept := 0
	for _, o := range r.ops {
		if !o.sent && o.kind != opTerminate && w.rng.IntN(2) == 0 {
			o.zombie = true
			w.zombies = append(w.zombies, o)
			kept++
		}
	}
	r.ops, r.actors = nil, map[string]*actor{}
	r.watch.Stop()
	w.tracef("%s dies (%d writes in flight may land)", r.name, kept)
}

// keepSession renews r's session, or opens one after it was lost, as
// Runner.keepSession does.
func (w *world) keepSession(r *runner) {
	if r.sess.ID == "" {
		r.faults = faults{op: "lease", f: w.sessionFault()}
		sess, err := r.store.OpenSession(w.ctx, r.name, TTL)
		r.faults = faults{}
		if err != nil {
			r.renewAt = w.now().Add(TTL / 10)
			w.tracef("%s opens a session -> %v", r.name, err)
			return
		}
		r.sess, r.renewAt = sess, w.now().Add(TTL/3)
		w.tracef("%s opens session %s", r.name, w.sid(sess.ID))
		w.step1(r, sched.SessionOpened{Session: sess}, nil)
		return
	}
	r.faults = faults{op: "lease", f: w.sessionFault()}
	sess, err := r.store.RenewSession(w.ctx, r.sess)
	r.faults = faults{}
	switch {
	case err == nil:
		r.sess, r.renewAt = sess, w.now().Add(TTL/3)
		w.step1(r, sched.SessionRenewed{Session: sess}, nil)
	case !errors.Is(err, events.ErrLeaseLost):
		r.renewAt = w.now().Add(TTL / 10)
		w.tracef("%s renews session %s -> %v", r.name, w.sid(r.sess.ID), err)
	default:
		w.res.Stats.SessionsLost++
		w.tracef("%s lost session %s", r.name, w.sid(r.sess.ID))
		id := r.sess.ID
		r.sess, r.renewAt = events.Session{}, w.now()
		w.step1(r, sched.SessionLost{ID: id}, nil)
	}
}

func (w *world) sessionFault() memstore.Fault {
	if w.noFaults || w.rng.IntN(10) != 0 {
		return memstore.NoFault
	}
	return memstore.FailBefore
}

// route feeds r's scheduler the next event of its follow.
// A runner's follow and watch deliver a few events at once: each is fed
// alone, and one at a time remains a choice (the PRNG draws how many).
func (w *world) route(r *runner) {
	for n := 1 + w.rng.IntN(min(len(w.envs)-int(r.follow), 4)); n > 0 && r.state == alive; n-- {
		env := w.envs[r.follow]
		r.follow = env.Seq
		w.step1(r, sched.Routed{Env: env}, nil)
	}
}

// pollWatches moves what each lease watch has into its runner's queue.
func (w *world) pollWatches() {
	if w.nats != nil {
		w.pollNATSWatches()
		return
	}
	for _, r := range w.runners {
		if r.state == dead {
			continue
		}
		for {
			u, err := r.watch.Next(w.done)
			if err != nil {
				break
			}
			r.watchQ = append(r.watchQ, u)
		}
	}
}

func (w *world) leaseUpdate(r *runner) {
	for n := 1 + w.rng.IntN(len(r.watchQ)); n > 0 && r.state == alive; n-- {
		u := r.watchQ[0]
		r.watchQ = r.watchQ[1:]
		w.step1(r, sched.LeaseChanged{Update: u}, nil)
	}
}

func (w *world) tick(r *runner) {
	r.wake = time.Time{}
	w.step1(r, sched.Tick{}, nil)
}

// step1 feeds ev to r's scheduler and carries out the Ready, as
// runnerActor.step does. cd is the claim ev reports, whose history a
// spawn takes.
func (w *world) step1(r *runner, ev sched.Event, cd *sched.ClaimDone) {
	rd := r.s.Step(sched.Input{Now: w.now(), Event: ev})
	w.tracef("%s %s%s", r.name, w.describeEvent(ev), describeReady(rd))
	if rd.Forward {
		env := ev.(sched.Routed).Env
		a := r.actors[env.Thread]
		if a == nil {
			w.fail(CheckDecide, fmt.Sprintf("%s forwarded %d to %s, which it does not hold", r.name, env.Seq, env.Thread))
			return
		}
		w.observe(r, a, env)
	}
	for _, th := range rd.Peeks {
		r.ops = append(r.ops, &op{kind: opPeek, thread: th, st: r.store})
	}
	for _, c := range rd.Claims {
		r.holders++
		r.ops = append(r.ops, &op{kind: opClaim, thread: c.Thread, claim: c, holder: fmt.Sprintf("%s/%d", r.name, r.holders), st: r.store})
	}
	for _, ack := range rd.Acks {
		r.ops = append(r.ops, &op{kind: opAck, ack: ack, st: r.store})
	}
	for _, th := range rd.SessionGone {
		if a := r.actors[th]; a != nil {
			w.decide(r, a, leaseLost)
		}
	}
	r.wake = rd.Wake
	st := r.s.Stats()
	w.res.Stats.Rechecks, w.res.Stats.KeptParked = max(w.res.Stats.Rechecks, int(st.Rechecks)), max(w.res.Stats.KeptParked, int(st.KeptParked))
	if rd.Spawn != nil {
		w.step1(r, w.spawn(r, *rd.Spawn, cd), nil)
	}
}

func (r *runner) actorsInOrder() []*actor {
	out := make([]*actor, 0, len(r.actors))
	for _, a := range r.actors {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *actor) int {
		if a.thread < b.thread {
			return -1
		}
		if a.thread > b.thread {
			return 1
		}
		return 0
	})
	return out
}

// wqItem is one post in the simulated work queue (natsstore.WorkQueue): a
// durable consumer on every posted subject, each post delivered to one
// runner and delivered again AckWait after, until acknowledged.
type wqItem struct {
	seq       uint64
	thread    string
	delivered bool
	at        time.Time // delivered at
	to        string
	acked     bool
}

// deliverable returns the oldest post the queue would hand out now.
func (w *world) deliverable() *wqItem {
	if !slices.ContainsFunc(w.runners, func(r *runner) bool { return r.state == alive }) {
		return nil
	}
	for _, it := range w.queue {
		if !it.acked && (!it.delivered || !it.at.Add(AckWait).After(w.now())) {
			return it
		}
	}
	return nil
}

// deliverWake hands the next post to one alive runner.
func (w *world) deliverWake() {
	it := w.deliverable()
	var live []*runner
	for _, r := range w.runners {
		if r.state == alive {
			live = append(live, r)
		}
	}
	w.deliverTo(live[w.rng.IntN(len(live))], it)
}

// queued returns the work queue's item for the post at seq, nil if it has
// none or it was delivered.
func (w *world) queued(seq uint64) *wqItem {
	for _, it := range w.queue {
		if it.seq == seq && !it.delivered {
			return it
		}
	}
	return nil
}

// deliverTo hands it to r.
func (w *world) deliverTo(r *runner, it *wqItem) {
	if it.delivered {
		w.res.Stats.Redelivered++
	}
	w.res.Stats.Wakes++
	it.delivered, it.at, it.to = true, w.now(), r.name
	w.step1(r, sched.Woken{Thread: it.thread, Ack: func() {
		if !it.acked {
			it.acked = true
			w.res.Stats.Acks++
			w.tracef("ack of post %d lands", it.seq)
		}
	}}, nil)
}
