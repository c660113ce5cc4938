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

	"artifactr/actors/agent"
	"artifactr/actors/thread"
	"artifactr/events"
	"artifactr/events/eventspb"
)

// Messages the thread actor sends itself from its goroutines and timers.
type (
	renewDue  struct{}
	renewDone struct {
		lease events.Lease
		err   error
	}
	tickDue      struct{}
	releaseDone  struct{ err error }
	tailEnded    struct{ err error }
	graceExpired struct{}
	drainReq     struct{}
)

// threadActor holds one claim. It feeds every I/O result, run report and
// timer to the pure thread.Core and carries out the Readys it returns. It
// never blocks in Receive: I/O runs in goroutines that report back by
// message.
type threadActor struct {
	r       *Runner
	claim   events.Claim
	history []events.Envelope
	core    *thread.Core
	log     *slog.Logger

	self   *actor.PID
	ctx    context.Context // ends when the actor stops
	cancel context.CancelFunc
	wg     sync.WaitGroup // the actor's goroutines

	lease      events.Lease
	renewTimer *time.Timer
	tickTimer  *time.Timer
	graceTimer *time.Timer
	stopping   bool

	runs map[string]*runHandle
}

func newThreadActor(r *Runner, c events.Claim, history []events.Envelope) *threadActor {
	return &threadActor{
		r:       r,
		claim:   c,
		history: history,
		lease:   c.Lease,
		log:     r.log.With("thread", c.Thread, "claim_seq", c.Seq),
		runs:    make(map[string]*runHandle),
	}
}

func (a *threadActor) send(msg any) { a.r.sys.Root.Send(a.self, msg) }

// goDo runs fn in a goroutine the actor waits for on stop.
func (a *threadActor) goDo(fn func()) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		fn()
	}()
}

// Receive implements actor.Actor.
func (a *threadActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.started(ctx)
	case thread.RunFinished:
		delete(a.runs, m.RunID)
		a.decide(ctx, m)
	case thread.Input:
		a.decide(ctx, m)
	case renewDue:
		lease := a.lease
		a.goDo(func() {
			l, err := a.r.store.RenewLease(a.ctx, lease)
			a.send(renewDone{lease: l, err: err})
		})
	case renewDone:
		switch {
		case m.err == nil:
			a.lease = m.lease
			a.armRenew(a.lease.TTL / 3)
		case errors.Is(m.err, events.ErrLeaseLost):
			a.decide(ctx, thread.LeaseLost{Err: m.err})
		default:
			// Storage unreachable: keep trying. The fence keeps writes
			// safe whatever happens to the lease meanwhile.
			a.log.Warn("lease renewal failed", "err", m.err)
			a.armRenew(a.lease.TTL / 10)
		}
	case tickDue:
		a.decide(ctx, thread.Tick{})
		a.tickTimer = a.rearm(a.tickTimer, a.r.cfg.IdleTimeout/idleTicks, tickDue{})
	case drainReq:
		a.decide(ctx, thread.Drain{})
		a.graceTimer = a.rearm(a.graceTimer, a.r.cfg.ShutdownGrace, graceExpired{})
	case graceExpired:
		a.decide(ctx, thread.Shutdown{})
	case tailEnded:
		// Without its tail the holder cannot see the log: give the thread
		// up rather than hold it without progress.
		a.log.Warn("thread tail ended; giving the thread up", "err", m.err)
		a.exec(ctx, thread.Ready{Cancel: a.runIDs(), Release: true, ReleaseReason: "tail lost", Stop: true, StopErr: m.err})
	case releaseDone:
		if m.err != nil {
			a.log.Warn("release failed; the lease will lapse", "err", m.err)
		}
		ctx.Stop(a.self)
	case *actor.Stopping:
		a.stopAll()
	case *actor.Stopped:
		a.log.Debug("thread actor stopped")
	}
}

func (a *threadActor) started(ctx actor.Context) {
	a.self = ctx.Self()
	a.ctx, a.cancel = context.WithCancel(a.r.ctx)
	a.core = thread.New(thread.Config{
		Agent:     a.r.cfg.Agent.Name(),
		Steerable: a.r.cfg.Agent.Steerable(),
		IdleTicks: idleTicks,

		MaxEventBytes: thread.MaxEventBytesOf(a.r.store),
	}, a.claim, a.history)
	from := uint64(1)
	if n := len(a.history); n > 0 {
		from = a.history[n-1].Seq + 1
	}
	a.history = nil
	tail, err := a.r.store.Tail(a.ctx, a.r.subjects.ThreadAll(a.claim.Thread), from)
	if err != nil {
		if a.ctx.Err() == nil {
			a.log.Error("cannot follow the thread; giving it up", "err", err)
		}
		a.exec(ctx, thread.Ready{Release: true, Stop: true, StopErr: err})
		return
	}
	a.goDo(func() { a.follow(tail) })
	a.armRenew(a.lease.TTL / 3)
	a.tickTimer = a.rearm(nil, a.r.cfg.IdleTimeout/idleTicks, tickDue{})
	a.r.stats.claims.Add(1)
	a.exec(ctx, a.core.Start())
	if a.r.draining() {
		a.send(drainReq{})
	}
}

// follow feeds the thread's events, in order, to the actor.
func (a *threadActor) follow(t events.Tail) {
	defer t.Stop()
	for {
		env, err := t.Next(a.ctx)
		if err != nil {
			if a.ctx.Err() == nil {
				a.send(tailEnded{err: err})
			}
			return
		}
		a.send(thread.Observed{Env: env})
	}
}

func (a *threadActor) decide(ctx actor.Context, in thread.Input) {
	if a.stopping {
		return
	}
	rd, err := a.core.Decide(in)
	if err != nil {
		a.log.Debug("input rejected", "input", fmt.Sprintf("%T", in), "err", err)
		return
	}
	a.exec(ctx, rd)
}

// exec carries out a Ready in the order its contract gives.
func (a *threadActor) exec(ctx actor.Context, rd thread.Ready) {
	for _, an := range rd.Anomalies {
		a.log.Warn("not acted on", "seq", an.Seq, "type", an.Type, "msg_id", an.MsgID, "reason", an.Reason)
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
	if ap := rd.Append; ap != nil {
		a.append(ap)
	}
	if rd.Sync {
		a.goDo(a.sync)
	}
	if rd.Stop {
		a.stopping = true
		if errors.Is(rd.StopErr, events.ErrThreadBusy) {
			a.r.stats.fenced.Add(1)
			a.log.Info("claim lost; stopping", "reason", rd.StopErr)
		}
		for _, h := range a.runs {
			h.cancel()
		}
		if rd.Release {
			c, why := a.claim, rd.ReleaseReason
			c.Lease = a.lease
			a.goDo(func() {
				rctx, cancel := context.WithTimeout(context.Background(), a.r.cfg.CallTimeout)
				defer cancel()
				err := events.ReleaseClaim(rctx, a.r.store, c, why, a.r.now())
				a.send(releaseDone{err: err})
			})
			return
		}
		ctx.Stop(a.self)
	}
}

func (a *threadActor) append(ap *thread.Append) {
	ev := proto.Clone(ap.Event).(*eventspb.Event)
	ev.Time = timestamppb.New(a.r.now())
	chk, id := ap.Check, ap.MsgID
	a.goDo(func() {
		if hook := a.r.cfg.BeforeAppend; hook != nil {
			hook(a.ctx, ev)
		}
		ack, err := a.r.store.Append(a.ctx, ev, chk, events.WithMsgID(id))
		if err == nil && !ack.Duplicate && events.TypeOf(ev) == events.TypeRunAbandoned {
			a.r.stats.abandoned.Add(1)
		}
		if err != nil && errors.Is(err, events.ErrThreadBusy) {
			a.log.Info("fenced write refused", "type", events.TypeOf(ev), "err", err)
		}
		a.send(thread.AppendDone{Ack: ack, Err: err})
	})
}

// sync reads the thread's last sequence, retrying until it can.
func (a *threadActor) sync() {
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		var last uint64
		var err error
		for _, k := range []events.Kind{events.KindPosted, events.KindClaim, events.KindRun} {
			var n uint64
			if n, err = a.r.store.LastSeq(a.ctx, a.claim.Thread, k); err != nil {
				break
			}
			last = max(last, n)
		}
		if err == nil {
			a.send(thread.Synced{LastSeq: last})
			return
		}
		select {
		case <-a.ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

func (a *threadActor) runIDs() []string {
	var ids []string
	for id := range a.runs {
		ids = append(ids, id)
	}
	return ids
}

func (a *threadActor) armRenew(d time.Duration) {
	a.renewTimer = a.rearm(a.renewTimer, d, renewDue{})
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

func (a *threadActor) stopAll() {
	a.stopping = true
	for _, t := range []*time.Timer{a.renewTimer, a.tickTimer, a.graceTimer} {
		if t != nil {
			t.Stop()
		}
	}
	for _, h := range a.runs {
		h.cancel()
	}
	a.cancel()
	a.wg.Wait()
}

func (a *threadActor) startRun(s thread.StartRun) {
	rctx, cancel := context.WithCancel(a.ctx)
	h := &runHandle{
		a: a, id: s.RunID, start: s, cancel: cancel,
		answers:  make(map[string]chan agent.Message),
		steering: make(chan agent.Message, 256),
	}
	a.runs[s.RunID] = h
	a.goDo(func() {
		defer cancel()
		out, err := runAgent(rctx, a.r.cfg.Agent, h)
		if err == nil && rctx.Err() != nil {
			err = rctx.Err()
		}
		if err != nil {
			a.r.stats.failed.Add(1)
		} else {
			a.r.stats.completed.Add(1)
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

	mu       sync.Mutex // protects answers and asked
	answers  map[string]chan agent.Message
	asked    int
	steering chan agent.Message
}

func (h *runHandle) Token() agent.Token             { return h.start.Token }
func (h *runHandle) Prompt() agent.Message          { return h.start.Prompt }
func (h *runHandle) History() []agent.Message       { return h.start.History }
func (h *runHandle) Steering() <-chan agent.Message { return h.steering }

func (h *runHandle) Emit(ctx context.Context, text string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", agent.ErrRunEnded, err) // as agenttest.Turn
	}
	h.a.send(thread.RunOutput{RunID: h.id, Text: text})
	return nil
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
		select {
		case h.steering <- d.Message:
		default:
			h.a.log.Warn("steering buffer full; message consumed but not delivered", "run", h.id, "seq", d.Message.Seq)
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
