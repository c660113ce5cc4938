package runner

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/artifactr/artifactr/actors/runner/owner"
	"github.com/artifactr/artifactr/actors/runner/sched"
	"github.com/artifactr/artifactr/actors/thread"
	"github.com/artifactr/artifactr/events"
)

// nowFunc is the clock the scheduler's timers run on: the real one, never
// Config.Now, which only stamps events and which tests skew.
var nowFunc = time.Now

// tick says the scheduler's timer is due.
type tick struct{}

// child is a thread actor as the runner actor knows it; the scheduler
// knows the rest.
type child struct {
	pid  *actor.PID
	fate *childFate
}

// childFate is what a thread actor tells the runner actor about its end. It
// is shared rather than sent because Terminated, a system message, may
// overtake any message the child sent before it stopped.
type childFate struct {
	clean    atomic.Bool   // the core chose to stop: released, or fenced out
	rework   atomic.Bool   // work arrived as it released: claim again
	released atomic.Bool   // its release was stored
	checked  atomic.Uint64 // posts up to this one were seen by the release
}

// runnerActor is the loop around the runner's [sched.Scheduler]: it feeds
// it what happens and carries out the Readys it returns. It holds no
// business logic, as a panic in it would stop every thread actor.
type runnerActor struct {
	r        *Runner
	s        *sched.Scheduler
	children map[string]child // the actors of the threads held
	own      *ownership       // partition ownership, with P > 1; else nil

	schedWake time.Time // the scheduler's timer, as its Ready last said
	armed     time.Time // the timer armed: the earlier of it and own's

	// props spawns every thread actor: Props per actor cost a few hundred
	// bytes per held thread. Its producer returns spawning, which the
	// spawn, synchronous in Receive, asks for once.
	props    *actor.Props
	spawning *threadActor
}

func newRunnerActor(r *Runner, s *sched.Scheduler, own *ownership) *runnerActor {
	return &runnerActor{r: r, s: s, own: own, children: map[string]child{}}
}

// Receive implements actor.Actor.
func (ra *runnerActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case claimResult: // before sched.Event, which it embeds
		ra.step(ctx, m.ClaimDone, &m)
	case sched.Event:
		ra.step(ctx, m, nil)
		if ra.own != nil {
			ra.ownLeaseChanged(ctx, m)
		}
	case owner.Event:
		if ra.own != nil {
			ra.ownStep(ctx, m)
		}
	case leave:
		if ra.own != nil {
			ra.own.leaving = true
			ra.ownStep(ctx, owner.Leave{})
		}
	case followOpen:
		if ra.own != nil {
			ra.own.followOpened(m)
		}
	case ownStart:
		if ra.own.session != "" {
			ra.ownStep(ctx, owner.SessionOpened{ID: ra.own.session})
		}
	case *actor.Terminated:
		if ev, ok := ra.terminated(ctx, m.Who); ok {
			ra.step(ctx, ev, nil)
		}
	case tick:
		ra.armed = time.Time{} // fired
		ra.step(ctx, sched.Tick{}, nil)
		if ra.own != nil {
			ra.ownStep(ctx, owner.Tick{})
		}
	case debugReq:
		d := debugReply{desc: ra.s.Describe(m.threads, ra.r.Followed()), actors: map[string]*actor.PID{}}
		if ra.own != nil {
			for _, th := range m.threads {
				p := events.Partition(th, ra.own.n)
				d.desc[th] += fmt.Sprintf(" partition(%d owns=%v followed=%v routed=%d last=%d)", p, ra.own.owns(th),
					ra.own.running[p] != nil, ra.r.parts.routed[p].Load(), ra.r.parts.last[p].Load())
			}
		}
		for _, th := range m.threads {
			if c, ok := ra.children[th]; ok {
				d.actors[th] = c.pid
			}
		}
		m.reply <- d
	case *actor.Stopped:
		close(ra.r.actorStopped)
	}
}

// step feeds ev to the scheduler and carries out its Ready. cr is the
// claim ev reports, whose view a spawn takes.
func (ra *runnerActor) step(ctx actor.Context, ev sched.Event, cr *claimResult) {
	r := ra.r
	rd := ra.s.Step(sched.Input{Now: nowFunc(), Ended: r.ctx.Err() != nil, Event: ev})
	if rd.Forward {
		env := ev.(sched.Routed).Env
		ctx.Send(ra.children[env.Thread].pid, thread.Observed{Env: env})
	}
	for _, th := range rd.Peeks {
		r.goDo(func() { r.send(r.peekOf(th)) })
	}
	for _, c := range rd.Claims {
		holder := r.cfg.ID + "/" + randHex(6)
		r.goDo(func() { r.send(r.claimOf(c, holder)) })
	}
	if len(rd.Acks) > 0 {
		r.goDo(func() { // an ack is a network write
			for _, a := range rd.Acks {
				a()
			}
		})
	}
	for _, th := range rd.SessionGone {
		ctx.Send(ra.children[th].pid, sessionGone{})
	}
	for _, th := range rd.Drain {
		// A thread whose partition this runner no longer owns is handed
		// over while the session lives on: its lease must go too.
		ctx.Send(ra.children[th].pid, drainReq{handover: ra.own != nil && !ra.own.owns(th)})
	}
	ra.schedWake = rd.Wake
	ra.rearm()
	if rd.Done {
		select {
		case <-r.done:
		default:
			close(r.done)
		}
	}
	r.publish(ra.s.Stats())
	if rd.Spawn != nil {
		ra.step(ctx, ra.spawn(ctx, *rd.Spawn, cr), nil)
	}
	if ra.own != nil && len(ra.own.draining) > 0 {
		switch ev.(type) {
		case sched.Terminated, sched.ClaimDone, sched.PeekDone, sched.Spawned:
			ra.maybeDrained(ctx) // a handover may be over
		}
	}
}

// spawn starts the thread actor of a claim.
func (ra *runnerActor) spawn(ctx actor.Context, sp sched.Spawn, cr *claimResult) sched.Spawned {
	fate := &childFate{}
	ra.spawning = newThreadActor(&ra.r.env, sp.Claim, cr.view, cr.snapSeq, cr.History, sp.Routed, sp.Probe, fate)
	pid, err := ctx.SpawnNamed(ra.threadProps(), actorName(sp.Thread, sp.Claim.Seq))
	ra.spawning = nil
	if err != nil {
		ra.r.log.Error("spawn thread actor", "thread", sp.Thread, "err", err)
		return sched.Spawned{Spawn: sp, Err: err}
	}
	ctx.Watch(pid)
	ra.children[sp.Thread] = child{pid: pid, fate: fate}
	return sched.Spawned{Spawn: sp}
}

// terminated forgets a stopped thread actor and reads the fate it left; it
// reports false for an actor the runner no longer holds.
func (ra *runnerActor) terminated(ctx actor.Context, who *actor.PID) (sched.Terminated, bool) {
	th, _, _ := strings.Cut(strings.TrimPrefix(who.Id, ctx.Self().Id+"/"), "#")
	c, ok := ra.children[th]
	if !ok || !c.pid.Equal(who) {
		return sched.Terminated{}, false
	}
	delete(ra.children, th)
	return sched.Terminated{
		Thread:   th,
		Clean:    c.fate.clean.Load(),
		Rework:   c.fate.rework.Load(),
		Released: c.fate.released.Load(),
		Checked:  c.fate.checked.Load(),
	}, true
}

// threadProps returns the Props that spawn thread actors.
func (ra *runnerActor) threadProps() *actor.Props {
	if ra.props == nil {
		ra.props = actor.PropsFromProducer(func() actor.Actor {
			if a := ra.spawning; a != nil {
				ra.spawning = nil
				return a
			}
			// Asked for outside a spawn: a restart, which the supervisor
			// never orders (a panicked thread actor is stopped). Stop.
			return stopAtStart{}
		}, actor.WithDispatcher(ra.r.disp))
	}
	return ra.props
}

// stopAtStart is an actor that stops as it starts.
type stopAtStart struct{}

// Receive implements actor.Actor.
func (stopAtStart) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		ctx.Stop(ctx.Self())
	}
}

// actorName names the actor of a claim: the thread and the claim's marker,
// never the same twice. protoactor finds a dead actor's PID again by name,
// and a stopped actor's goroutines (appends, syncs, runs) still report to
// it: under the thread's name alone they would reach the thread's next
// actor, which would take an append result for its own.
func actorName(thread string, claimSeq uint64) string {
	return thread + "#" + strconv.FormatUint(claimSeq, 10)
}

// Wake has the runner look at thread: read it and claim it if it has work
// (a message pending, or a run to abandon), as for a look again. A detector
// of stranded threads calls it (serve's thread-summaries projector). It
// returns at once; call it after Start. An invalid thread id is ignored.
func (r *Runner) Wake(thread string) {
	if events.ValidateThreadID(thread) != nil || r.stopCalled.Load() {
		return
	}
	r.send(sched.LookAt{Thread: thread})
}

// peekOf peeks th, within a call's time, and reports it.
func (r *Runner) peekOf(th string) sched.PeekDone {
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.CallTimeout)
	defer cancel()
	work, err := r.peek(ctx, th)
	return sched.PeekDone{Thread: th, Work: work, Err: err}
}

// claimOf makes claim c, within a call's time, and reports it.
func (r *Runner) claimOf(c sched.Claim, holder string) claimResult {
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.CallTimeout)
	defer cancel()
	return r.claim(ctx, c.Session, c.Thread, holder)
}

// armTimer has the timer goroutine send a tick at at; zero stops it. It
// never blocks: the goroutine reads the latest time when kicked.
func (r *Runner) armTimer(at time.Time) {
	r.timerMu.Lock()
	r.timerAt = at
	r.timerMu.Unlock()
	select {
	case r.timerKick <- struct{}{}:
	default: // a kick is pending; it reads the time just set
	}
}

// runTimer is the scheduler's one timer: a re-armed time.Timer, never a
// sleeping goroutine per timer.
func (r *Runner) runTimer() {
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			t.Stop()
			return
		case <-r.timerKick:
			r.timerMu.Lock()
			at := r.timerAt
			r.timerMu.Unlock()
			t.Stop()
			if !at.IsZero() {
				t.Reset(at.Sub(nowFunc()))
			}
		case <-t.C:
			r.send(tick{})
		}
	}
}

// publish stores the scheduler's counters where Stats reads them.
func (r *Runner) publish(st sched.Stats) {
	r.stats.claims.Store(st.Claims)
	r.stats.held.Store(st.Held)
	r.stats.panics.Store(st.Panics)
	r.stats.claimsBusy.Store(st.ClaimsBusy)
	r.stats.rechecks.Store(st.Rechecks)
	r.stats.rechecksDue.Store(st.RechecksDue)
	r.stats.peeks.Store(st.Peeks)
	r.stats.liveSessions.Store(st.LiveSessions)
	r.stats.keptParked.Store(st.KeptParked)
	r.stats.leasesReclaimed.Store(st.LeasesReclaimed)
}

// debugReq asks the runner actor where threads stand, for diagnostics.
type debugReq struct {
	threads []string
	reply   chan debugReply
}

// debugReply is the runner actor's answer to a debugReq: its scheduler's
// description of each thread, and the thread actors it holds, to ask.
type debugReply struct {
	desc   map[string]string
	actors map[string]*actor.PID
}

// describeReq asks a thread actor where its claim stands, for diagnostics.
type describeReq struct{ reply chan string }

// Describe returns, for each of threads, what this runner knows of it:
// whether it is queued for a claim, being claimed or held, the session its
// lease lives by as the lease watch last said, and for a thread it holds,
// what its actor waits for. It is for diagnostics.
func (r *Runner) Describe(ctx context.Context, threads []string) map[string]string {
	req := debugReq{threads: threads, reply: make(chan debugReply, 1)}
	r.send(req)
	var d debugReply
	select {
	case d = <-req.reply:
	case <-ctx.Done():
		return nil
	}
	for th, pid := range d.actors {
		// Buffered: an actor that answers after the wait does not block.
		dr := describeReq{reply: make(chan string, 1)}
		r.sys.Root.Send(pid, dr)
		wait := time.NewTimer(time.Second) // a stopped actor never answers
		select {
		case s := <-dr.reply:
			d.desc[th] += " " + s
		case <-wait.C:
			d.desc[th] += " actor(no answer)"
		case <-ctx.Done():
			d.desc[th] += " actor(no answer)"
		}
		wait.Stop()
	}
	return d.desc
}

// ConsumeBound is the runners' promise: once faults stop (every runner up,
// clocks true, the store reachable), a thread free to take its oldest
// message (posted, and the thread's previous run ended) has it taken within
// ConsumeBound, by a claim that read it. It is for runners with session TTL
// claimTTL sharing a work queue whose unacknowledged wake-ups come back
// after ackWait. The terms are the longest ways back to a thread:
//
//   - ackWait: a wake-up left with a runner that died before a claim read
//     its post is handed to another;
//   - claimTTL: a dead runner's session lapses, freeing its threads;
//   - 2 claimTTLs: a runner a lapsed session's thread did not fall to,
//     or one that found the thread busy, looks at it again (busyCheck,
//     orphanCheck);
//   - 8s: a claim that failed on the store is tried again.
//
// The chaos and simulation tests hold the runners to it, and the
// thread-summaries projector reports a thread that waits longer with a
// pending message and no claim as stranded.
func ConsumeBound(claimTTL, ackWait time.Duration) time.Duration {
	return ackWait + (1+sched.OrphanRecheck)*claimTTL + sched.MaxClaimRetry
}
