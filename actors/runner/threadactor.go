package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/thread"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/sys"
	"github.com/artifactr/artifactr/projections"
)

// Messages the thread actor gets from the runner actor, its goroutines and
// its timers.
type (
	idleDue      struct{}
	releaseDone  struct{ err error }
	graceExpired struct{}
	drainReq     struct{ handover bool }
	// sessionGone says the session the claim lives by was lost.
	sessionGone struct{}
)

// testHookReceive, when set by a test, is called at the start of every
// Receive of a thread actor, with the actor's PID. Tests use it to panic
// inside an actor and to see which actor a message reached.
var testHookReceive func(thread string, self *actor.PID, msg any)

// threadActor holds one claim. It feeds every event the runner routes to
// it, every I/O result, run report and timer to the pure thread.Core and
// carries out the Readys it returns. It never blocks in Receive: I/O runs in
// goroutines that report back by message, and a stop waits for nothing.
//
// An idle claimed thread costs its actor, its core's view and one timer:
// no goroutine, no consumer and no periodic work.
type threadActor struct {
	env     *threadEnv
	claim   events.Claim
	view    *projections.Thread // what the claim started from (a snapshot, the replay's chunks), or nil
	history []events.Envelope
	routed  []events.Envelope // routed while it was claimed: observed after the start
	snapSeq uint64            // the sequence of the snapshot it started from
	probe   bool              // claimed through a lapsed session: give up at once if idle
	fate    *childFate
	core    *thread.Core

	self   *actor.PID
	ctx    context.Context // ends when the actor stops
	cancel context.CancelFunc

	idleTimer  *time.Timer
	graceTimer *time.Timer
	// catchUp checks, while the core waits for events its view lacks,
	// that they arrive (catchUpDue); catchUpAt is the view's end at the
	// last check.
	catchUp   *time.Timer
	catchUpAt uint64
	catchUpOn bool
	stopping  bool
	end       endGate // tells the observer the claim ended, after its appends

	runs map[string]*runHandle

	posts postQueue // events waiting for a post's resolution (firstpost.go)
}

// threadEnv is all a thread actor uses of its runner: the configuration,
// the store, the clock and the logger, which never change once the runner
// started, and services safe from any goroutine (the counters, the
// goroutine group, the actor system's root). It reads no state the runner
// actor changes: what it tells the runner goes by messages, and by its
// childFate, which the runner reads once the actor has stopped (protoactor
// delivers the Terminated, a system message, before user messages sent
// earlier, so a last message could not carry it). One per runner, shared:
// a held thread pays one pointer for it.
type threadEnv struct {
	cfg           *Config
	store         events.Store
	stats         *stats
	log           *slog.Logger
	ctx           context.Context // the runner's: ends when it stops
	root          *actor.RootContext
	goDo          func(func())
	now           func() time.Time
	snapshotSaved func(*pendingSnapshot, error)
}

func newThreadActor(env *threadEnv, c events.Claim, view *projections.Thread, snapSeq uint64, history, routed []events.Envelope, probe bool, fate *childFate) *threadActor {
	return &threadActor{env: env, claim: c, view: view, snapSeq: snapSeq, history: history, routed: routed, probe: probe, fate: fate}
}

// endGate orders the observer's calls: the claim ends once the actor stopped
// and every append it made has reported its result, which may come after
// the stop (a stop waits for nothing).
type endGate struct {
	mu       sync.Mutex // protects the fields below
	inflight int
	stopped  bool
	ended    bool
}

func (g *endGate) begin() {
	g.mu.Lock()
	g.inflight++
	g.mu.Unlock()
}

// done reports whether the claim ends now, with the last append's result.
func (g *endGate) done() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	return g.maybeEnd()
}

// stop reports whether the claim ends now, with the actor's stop.
func (g *endGate) stop() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	return g.maybeEnd()
}

func (g *endGate) maybeEnd() bool {
	if g.stopped && g.inflight == 0 && !g.ended {
		g.ended = true
		return true
	}
	return false
}

// takeover reports whether the claim took the thread from a holder that
// never released it: the claim marker before its own was not followed by a
// release.
func (a *threadActor) takeover() bool {
	for i := len(a.history) - 1; i >= 0; i-- {
		env := &a.history[i]
		// A marker is on the claim or, with events.Subjects.RunFence, the
		// run subject: its type tells.
		typ := events.TypeOf(env.Event)
		if env.Seq >= a.claim.Seq || !typ.Marker() {
			continue
		}
		return typ == events.TypeThreadClaimed
	}
	if a.view != nil {
		return a.view.Claim.Seq != 0 && !a.view.Claim.Released
	}
	return false
}

// log returns the actor's logger. It is made on use: a logger with fields
// costs memory that idle threads need not pay.
func (a *threadActor) log() *slog.Logger {
	return a.env.log.With("thread", a.claim.Thread, "claim_seq", a.claim.Seq)
}

func (a *threadActor) send(msg any) { a.env.root.Send(a.self, msg) }

// Receive implements actor.Actor.
func (a *threadActor) Receive(ctx actor.Context) {
	if h := testHookReceive; h != nil {
		h(a.claim.Thread, ctx.Self(), ctx.Message())
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.started(ctx)
	case thread.Observed:
		a.observe(ctx, m.Env)
	case firstPostResolved:
		a.resolved(ctx, m.env)
	case firstPostMissing:
		a.missing(ctx, m.env)
	case firstPostCreated:
		a.created(ctx, m)
	case thread.RunFinished:
		delete(a.runs, m.RunID)
		a.decide(ctx, m)
	case thread.RunSteer:
		if !a.decide(ctx, m) {
			if h := a.runs[m.RunID]; h != nil {
				h.steerAnswered() // refused: nothing more is given
			}
		}
	case thread.RunOutput:
		if !a.decide(ctx, m) {
			if h := a.runs[m.RunID]; h != nil {
				h.written(len(m.Text)) // never to be written: do not hold Emit
			}
		}
	case thread.Input:
		a.decide(ctx, m)
	case sessionGone:
		a.decide(ctx, thread.LeaseLost{Err: errors.New("the runner's session was lost")})
	case idleDue:
		a.decide(ctx, thread.Tick{})
		a.armIdle()
	case catchUpDue:
		a.catchUpOn = false
		a.checkCaughtUp(true)
	case describeReq:
		m.reply <- fmt.Sprintf("actor(stopping=%v queued=%d resolving=%v creating=%d runs=%d) %s",
			a.stopping, len(a.posts.q), a.posts.busy, len(a.posts.creating), len(a.runs), a.core.Describe())
	case drainReq:
		a.decide(ctx, thread.Drain{Handover: m.handover})
		a.graceTimer = a.rearm(a.graceTimer, a.env.cfg.ShutdownGrace, graceExpired{})
	case graceExpired:
		a.decide(ctx, thread.Shutdown{})
	case releaseDone:
		if m.err != nil {
			a.log().Warn("release failed; claiming the thread again", "err", m.err)
		}
		ctx.Stop(a.self)
	case *actor.Stopping:
		a.stopAll()
	}
}

func (a *threadActor) started(ctx actor.Context) {
	a.self = ctx.Self()
	a.ctx, a.cancel = context.WithCancel(a.env.ctx)
	a.env.cfg.Observer.Claimed(a.claim, a.takeover())
	if o, ok := a.env.cfg.Observer.(StartObserver); ok {
		var first, last uint64
		if n := len(a.history); n > 0 {
			first, last = a.history[0].Seq, a.history[n-1].Seq
		}
		o.ClaimStarted(a.claim, a.snapSeq, first, last)
	}
	cfg := thread.Config{
		Agent:     a.env.cfg.Agent.Name(),
		Steerable: a.env.cfg.Agent.Steerable(),
		IdleTicks: 1,

		MaxEventBytes: thread.MaxEventBytesOf(a.env.store),
		HistoryWindow: a.env.cfg.HistoryWindow,
	}
	if a.view != nil {
		a.core = thread.NewFromView(cfg, a.claim, a.view, a.history)
	} else {
		a.core = thread.New(cfg, a.claim, a.history)
	}
	a.history, a.view = nil, nil
	a.exec(ctx, a.core.Start())
	// Events routed while the claim was made: the core skips those its
	// history holds, and the posts among the others are resolved first.
	routed := a.routed
	a.routed = nil
	for _, env := range routed {
		a.observe(ctx, env)
	}
	if a.probe {
		// Found through a lapsed session: if it has nothing to do, give
		// it up now rather than after the idle timeout.
		a.decide(ctx, thread.Tick{})
	}
	a.armIdle()
}

// decide reports whether the core took the input.
func (a *threadActor) decide(ctx actor.Context, in thread.Input) bool {
	if a.stopping {
		return false
	}
	rd, err := a.core.Decide(in)
	a.exec(ctx, rd) // a rejected input's Ready too (Core.Decide)
	a.checkCaughtUp(false)
	if err != nil {
		a.log().Debug("input rejected", "input", fmt.Sprintf("%T", in), "err", err)
		return false
	}
	return true
}

// exec carries out a Ready in the order its contract gives.
func (a *threadActor) exec(ctx actor.Context, rd thread.Ready) {
	for _, an := range rd.Anomalies {
		a.log().Warn("not acted on", "seq", an.Seq, "type", an.Type, "msg_id", an.MsgID, "reason", an.Reason)
	}
	for _, id := range rd.Cancel {
		if h := a.runs[id]; h != nil {
			h.cancel()
		}
	}
	for _, s := range rd.Start {
		a.startRun(s)
	}
	for _, d := range rd.Deliver {
		if h := a.runs[d.RunID]; h != nil {
			h.deliver(d)
		}
	}
	for _, id := range rd.Steered {
		if h := a.runs[id]; h != nil {
			h.steerAnswered()
		}
	}
	if ap := rd.Append; ap != nil {
		a.append(ap)
	}
	if rd.Sync {
		a.env.goDo(a.sync)
	}
	if rd.Stop {
		a.stopping = true
		a.fate.clean.Store(true)
		if errors.Is(rd.StopErr, events.ErrThreadBusy) {
			a.env.stats.fenced.Add(1)
			a.log().Info("claim lost; stopping", "reason", rd.StopErr)
		}
		for _, h := range a.runs {
			h.cancel()
		}
		if rd.Release != nil {
			a.release(*rd.Release)
			return
		}
		ctx.Stop(a.self)
	}
}

// release gives the claim up as the core decided (thread.Release): on
// shutdown a thread with messages left keeps its lease, so that the
// session's close hands it to another runner. After an idle release, a
// post that arrived meanwhile is claimed again.
func (a *threadActor) release(rel thread.Release) {
	c := a.claim
	why, pending, lastPosted := rel.Reason, rel.Pending, rel.LastPosted
	store, fate := a.env.store, a.fate
	snap := a.snapshot()
	a.env.goDo(func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), a.env.cfg.CallTimeout)
		defer cancel()
		var err error
		if rel.KeepLease {
			err = events.ReleaseMarkerAt(rctx, store, c, rel.RunSeq, why, a.env.now())
		} else {
			err = events.ReleaseClaimAt(rctx, store, c, rel.RunSeq, why, a.env.now())
		}
		if snap != nil {
			serr := snap.save(rctx)
			a.env.snapshotSaved(snap, serr)
			if serr != nil {
				// A claim then replays the thread's events after the
				// older snapshot, or all of them: slower, not wrong.
				a.log().Warn("snapshot not saved", "bytes", len(snap.data), "err", serr)
			}
		}
		if err != nil && errors.Is(err, events.ErrNoStorage) {
			a.env.stats.notWritten.Add(1)
			a.log().Warn("release not written: the server is out of storage; the claim lapses with the session", "err", err)
		}
		switch {
		case err != nil:
			// The marker or the lease may still be ours, under a session
			// that lives on: claim again, or the thread waits for this
			// runner's end.
			fate.rework.Store(true)
		case why != "shutdown":
			fate.released.Store(true)
			last, lerr := store.LastSeq(rctx, c.Thread, events.KindPosted)
			if pending || lerr != nil || last > lastPosted {
				fate.rework.Store(true)
			}
			fate.checked.Store(max(last, lastPosted))
		default:
			fate.released.Store(true)
			fate.checked.Store(lastPosted)
		}
		a.send(releaseDone{err: err})
	})
}

// pendingSnapshot is a snapshot encoded on the actor's goroutine, to be
// saved off it.
type pendingSnapshot struct {
	store  events.SnapshotStore
	thread string
	data   []byte
}

func (p *pendingSnapshot) save(ctx context.Context) error {
	return p.store.SaveSnapshot(ctx, p.thread, p.data)
}

// snapshot encodes the view when the store keeps snapshots and the claim
// started from none, or the view has moved SnapshotEvery events past the
// one it started from: every released thread has one.
func (a *threadActor) snapshot() *pendingSnapshot {
	ss, ok := a.env.store.(events.SnapshotStore)
	every := a.env.cfg.SnapshotEvery
	v := a.core.View()
	if !ok || every < 0 || v.LastSeq == 0 || (a.snapSeq != 0 && v.LastSeq < a.snapSeq+uint64(every)) {
		return nil
	}
	if len(a.posts.creating) > 0 {
		// Entries not written yet: the snapshot remembers their ids.
		v = v.Clone()
		for id := range a.posts.creating {
			v.RememberID(id)
		}
	}
	data, err := v.EncodeSnapshot()
	if err != nil {
		a.log().Warn("snapshot not encoded", "err", err)
		return nil
	}
	a.env.stats.snapshotsSaved.Add(1)
	return &pendingSnapshot{store: ss, thread: a.claim.Thread, data: data}
}

func (a *threadActor) append(ap *thread.Append) {
	ev := proto.Clone(ap.Event).(*eventspb.Event)
	ev.Time = timestamppb.New(a.env.now())
	chk, id := ap.Check, ap.MsgID
	ctx := a.ctx
	observed := a.env.cfg.Observer.Appending(a.claim, ev, a.core.View())
	var out *runHandle // the run whose Emit waits for this output
	if o := ev.GetRunOutput(); o != nil {
		out = a.runs[o.GetRunId()]
	}
	a.end.begin()
	a.env.goDo(func() {
		if ap.Retry > 0 && !sys.Sleep(ctx, retryDelay(ap.Retry)) {
			// Stopping: the append is not sent again, and no verdict
			// comes back (the core would only ask again). Whether the
			// last send landed, the next holder reads in the log.
			observed(events.Ack{}, ctx.Err())
			if a.end.done() {
				a.env.cfg.Observer.ClaimEnded(a.claim)
			}
			return
		}
		if hook := a.env.cfg.BeforeAppend; hook != nil {
			hook(ctx, ev)
		}
		// A write handed to the store waits for its verdict even if the
		// actor stops meanwhile (it saw a newer claim while the write was
		// in flight): the store's Timeout and the runner's end bound it.
		// So a stale write that the fence or the run's compare-and-set
		// refuses is reported as refused, not lost as "canceled". A write
		// not yet sent when the actor stopped is not sent.
		sendCtx := a.env.ctx
		if ctx.Err() != nil {
			sendCtx = ctx
		}
		ack, err := a.env.store.Append(sendCtx, ev, chk, events.WithMsgID(id))
		observed(ack, err)
		if out != nil {
			out.written(len(ev.GetRunOutput().GetText()))
		}
		if a.end.done() {
			a.env.cfg.Observer.ClaimEnded(a.claim)
		}
		if err == nil && !ack.Duplicate && events.TypeOf(ev) == events.TypeRunAbandoned {
			a.env.stats.abandoned.Add(1)
		}
		switch {
		case err != nil && errors.Is(err, events.ErrThreadBusy):
			a.log().Info("fenced write refused", "type", events.TypeOf(ev), "msg_id", id, "err", err)
		case err != nil && !errors.Is(err, events.ErrNoStorage) && ctx.Err() == nil:
			a.log().Info("append outcome unknown; the log decides whether it is sent again", "type", events.TypeOf(ev), "msg_id", id, "sends", ap.Retry+1, "err", err)
		case err == nil && ap.Retry > 0:
			a.log().Info("resent append settled", "type", events.TypeOf(ev), "msg_id", id, "sends", ap.Retry+1, "seq", ack.Seq, "duplicate", ack.Duplicate)
		}
		if err != nil && errors.Is(err, events.ErrNoStorage) {
			// The core tries again (or, stopping, gives up): not at once,
			// the store stays full for a while.
			a.env.stats.notWritten.Add(1)
			a.log().Warn("not written: the server is out of storage", "type", events.TypeOf(ev))
			sys.Sleep(a.ctx, noStorageRetry)
		}
		a.send(thread.AppendDone{Ack: ack, Err: err})
	})
}

// retryDelay is how long the n-th resend of an append whose outcome was
// unknown waits: the store already retried within its timeout, so the
// server is down or electing, and a resend at once would spin.
func retryDelay(n int) time.Duration {
	return min(50*time.Millisecond<<min(n-1, 5), time.Second)
}

// noStorageRetry is how long an append refused for want of storage waits
// before the core tries again.
const noStorageRetry = time.Second

// sync reads the thread's last sequence, retrying until it can.
func (a *threadActor) sync() {
	b := sys.NewBackoff(10*time.Millisecond, time.Second)
	for {
		last, err := events.ThreadLastSeq(a.ctx, a.env.store, a.claim.Thread)
		if err == nil {
			a.send(thread.Synced{LastSeq: last})
			return
		}
		if !b.Wait(a.ctx) {
			return
		}
	}
}

// catchUpDue says it is time to check that the core's view moves.
type catchUpDue struct{}

// catchUpWait is how long a core may wait for events it knows are stored
// (its own acked appends, or the log a sync read) before the actor reads
// them from the store itself. They reach it through the runner's follow,
// which delivers them in a few milliseconds; one that does not (a thread
// held where its partition is not followed, a follow that stalled) would
// otherwise leave the core waiting for good.
var catchUpWait = 2 * time.Second

// checkCaughtUp keeps one timer running while the core waits for events,
// and when fired with the view where it was at the last check, reads the
// missing events from the store and hands them to the core, in order, as
// the follow would. They are the log's events: a later copy from the follow
// is ignored as already seen.
func (a *threadActor) checkCaughtUp(fired bool) {
	last, await, behind := a.core.Behind()
	if !behind || a.stopping {
		return
	}
	if fired && last == a.catchUpAt {
		a.readAhead(last, await)
	}
	a.catchUpAt = last
	if !a.catchUpOn {
		a.catchUpOn = true
		a.catchUp = a.rearm(a.catchUp, catchUpWait, catchUpDue{})
	}
}

// readAhead reads the thread's events after last, up to await, and sends
// them to the actor as Observed.
func (a *threadActor) readAhead(last, await uint64) {
	th, store, ctx := a.claim.Thread, a.env.store, a.ctx
	a.env.stats.catchUps.Add(1)
	a.log().Warn("events stored for this claim did not arrive; reading them", "after", last, "up_to", await)
	a.env.goDo(func() {
		rctx, cancel := context.WithTimeout(ctx, a.env.cfg.CallTimeout)
		defer cancel()
		var envs []events.Envelope
		var err error
		if bl, ok := store.(events.BoundedLoader); ok {
			envs, err = bl.LoadUpTo(rctx, th, last+1, await)
		} else {
			envs, err = store.Load(rctx, th, last+1)
		}
		if err != nil {
			return // the next check tries again
		}
		for _, e := range envs {
			a.send(thread.Observed{Env: e})
		}
	})
}

// armIdle starts the idle timeout again: it ends IdleTimeout after the last
// event or tick. A one-shot timer per thread costs nothing while it waits.
func (a *threadActor) armIdle() {
	if a.stopping {
		return
	}
	if a.idleTimer == nil {
		a.idleTimer = time.AfterFunc(a.env.cfg.IdleTimeout, func() { a.send(idleDue{}) })
		return
	}
	a.idleTimer.Reset(a.env.cfg.IdleTimeout)
}

// rearm replaces a one-shot timer; re-armed timers stand in for
// protoactor's ReceiveTimeout, which races.
func (a *threadActor) rearm(t *time.Timer, d time.Duration, msg any) *time.Timer {
	if t != nil {
		t.Stop()
	}
	if a.stopping {
		return nil
	}
	return time.AfterFunc(max(d, time.Millisecond), func() { a.send(msg) })
}

// stopAll ends the actor's timers, runs and I/O. It waits for none of them:
// the runner's stop does.
func (a *threadActor) stopAll() {
	a.stopping = true
	for _, t := range []*time.Timer{a.idleTimer, a.graceTimer, a.catchUp} {
		if t != nil {
			t.Stop()
		}
	}
	for _, h := range a.runs {
		h.cancel()
	}
	if a.cancel != nil {
		a.cancel()
		if a.end.stop() {
			a.env.cfg.Observer.ClaimEnded(a.claim)
		}
	}
}

func (a *threadActor) startRun(s thread.StartRun) {
	if a.runs == nil {
		a.runs = make(map[string]*runHandle)
	}
	rctx, cancel := context.WithCancel(a.ctx)
	rctx = a.env.cfg.Observer.RunContext(rctx, a.claim, s.RunID)
	h := &runHandle{
		a: a, id: s.RunID, start: s, cancel: cancel, ctx: rctx,
		answers: make(map[string]chan agent.Message), wrote: make(chan struct{}, 1),
		steered: make(chan struct{}),
	}
	a.runs[s.RunID] = h
	a.env.goDo(func() {
		defer cancel()
		out, err := runAgent(rctx, a.env.cfg.Agent, h)
		if err == nil && rctx.Err() != nil {
			err = rctx.Err()
		}
		if err != nil {
			a.env.stats.failed.Add(1)
		} else {
			a.env.stats.completed.Add(1)
		}
		a.send(thread.RunFinished{RunID: s.RunID, Output: out, Err: err})
	})
}

// runAgent runs one turn and turns a panic in the agent into a failed run.
func runAgent(ctx context.Context, ag agent.Agent, t agent.Turn) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("agent %s panicked: %v", ag.Name(), p)
		}
	}()
	return ag.Run(ctx, t)
}

// runHandle is a run as its agent sees it: the agent.Turn.
type runHandle struct {
	a      *threadActor
	id     string
	start  thread.StartRun
	cancel context.CancelFunc
	ctx    context.Context // the run's

	histOnce   sync.Once
	hist, conv []agent.Message // read from the log on the agent's first ask

	mu       sync.Mutex // protects answers, asked, steering, steered and unwritten
	answers  map[string]chan agent.Message
	asked    int
	steering []agent.Message // given to the run, not yet returned by Steer
	// steerAsks and steerAnswers count the run's steering asks and their
	// answers, which come one per ask, in order; steered is closed and
	// replaced at every answer.
	steerAsks, steerAnswers int
	steered                 chan struct{}
	// unwritten counts the bytes of output emitted and not yet appended;
	// wrote is signalled when it drops.
	unwritten int
	wrote     chan struct{}
}

// maxUnwrittenOutput bounds the output a run may have emitted that is not
// yet written. Emit waits past it, so an agent that writes faster than the
// store holds the actor's queues (and the process's memory) to this, and
// its run's time limit covers its appends.
const maxUnwrittenOutput = 64 << 10

// written records that n bytes of the run's output were appended, or
// never will be.
func (h *runHandle) written(n int) {
	h.mu.Lock()
	h.unwritten -= n
	h.mu.Unlock()
	select {
	case h.wrote <- struct{}{}:
	default:
	}
}

func (h *runHandle) Token() agent.Token    { return h.start.Token }
func (h *runHandle) Prompt() agent.Message { return h.start.Prompt }

// History reads the run's history from the log on first use (history.go).
func (h *runHandle) History() []agent.Message { h.readHistory(); return h.hist }

// Conversation implements [agent.Conversational].
func (h *runHandle) Conversation() []agent.Message { h.readHistory(); return h.conv }

// steeringBuffer is how many steering messages a run may hold unread
// before further ones are dropped with a warning. An ask takes at most
// 64 (the core's bound); only steering the run did not ask for, stored by
// another writer, can come near it.
const steeringBuffer = 256

// Steer implements [agent.Turn]: it asks the thread actor for steering and
// waits until the ask is answered, each message given to the run (stored
// as steering_given) by then.
func (h *runHandle) Steer(ctx context.Context) ([]agent.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", agent.ErrRunEnded, err)
	}
	if h.a.env.cfg.Agent.Steerable() {
		h.mu.Lock()
		h.steerAsks++
		ask := h.steerAsks
		h.mu.Unlock()
		h.a.send(thread.RunSteer{RunID: h.id})
		for {
			h.mu.Lock()
			done, ch := h.steerAnswers >= ask, h.steered
			h.mu.Unlock()
			if done {
				break
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: %w", agent.ErrRunEnded, ctx.Err())
			case <-h.ctx.Done():
				return nil, fmt.Errorf("%w: %w", agent.ErrRunEnded, h.ctx.Err())
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	got := h.steering
	h.steering = nil
	return got, nil
}

// steerAnswered runs on the actor's goroutine when one of the run's
// steering asks was answered or refused.
func (h *runHandle) steerAnswered() {
	h.mu.Lock()
	h.steerAnswers++
	close(h.steered)
	h.steered = make(chan struct{})
	h.mu.Unlock()
}

func (h *runHandle) Emit(ctx context.Context, text string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", agent.ErrRunEnded, err) // as agenttest.Turn
	}
	h.mu.Lock()
	h.unwritten += len(text)
	h.mu.Unlock()
	h.a.send(thread.RunOutput{RunID: h.id, Text: text})
	for {
		h.mu.Lock()
		over := h.unwritten > maxUnwrittenOutput
		h.mu.Unlock()
		if !over {
			return nil
		}
		select {
		case <-h.wrote:
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", agent.ErrRunEnded, ctx.Err())
		}
	}
}

func (h *runHandle) Ask(ctx context.Context, question string) (agent.Message, error) {
	ch := make(chan agent.Message, 1)
	h.mu.Lock()
	h.asked++
	id := fmt.Sprintf("%s/q%d", h.id, h.asked)
	h.answers[id] = ch
	h.mu.Unlock()
	h.a.send(thread.RunAsked{RunID: h.id, RequestID: id, Question: question})
	select {
	case m := <-ch:
		return m, nil
	case <-ctx.Done():
		return agent.Message{}, fmt.Errorf("%w: %w", agent.ErrRunEnded, ctx.Err())
	}
}

// deliver runs on the actor's goroutine.
func (h *runHandle) deliver(d thread.Deliver) {
	if d.RequestID == "" {
		h.mu.Lock()
		full := len(h.steering) >= steeringBuffer
		if !full {
			h.steering = append(h.steering, d.Message)
		}
		h.mu.Unlock()
		if full {
			h.a.log().Warn("steering buffer full; message consumed but not delivered", "run", h.id, "seq", d.Message.Seq)
		}
		return
	}
	h.mu.Lock()
	ch := h.answers[d.RequestID]
	delete(h.answers, d.RequestID)
	h.mu.Unlock()
	if ch != nil {
		ch <- d.Message
	}
}
