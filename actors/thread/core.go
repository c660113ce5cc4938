package thread

import (
	"errors"
	"fmt"
	"time"

	"artifactr/actors/agent"
	"artifactr/events"
	"artifactr/events/eventspb"
	"artifactr/projections"
)

// Config configures a [Core].
type Config struct {
	// Agent names the agent in run_started.
	Agent string
	// Steerable says whether messages posted during a run are given to it
	// as steering; otherwise they wait for the next run.
	Steerable bool
	// IdleTicks is how many idle Ticks in a row release the claim. 0 never
	// releases.
	IdleTicks int
}

// Append is an append the shell must make, with the check it carries. The
// shell sends it as is, with MsgID as its Nats-Msg-Id, and reports the
// result as [AppendDone].
type Append struct {
	Event *eventspb.Event
	Check events.Check
	MsgID string
}

// Ready is what the shell must do after a Decide, in this order: cancel and
// start runs, deliver messages, make the append (at most one: one append per
// thread is in flight), sync, then release and stop.
//
// The loop's contract: the shell reports every append's result as
// AppendDone and every event of the thread, in order, as Observed. It
// starts runs and delivers messages only when Ready says so, which is only
// after the log holds the events that consumed them.
type Ready struct {
	Cancel  []string // run ids to cancel
	Start   []StartRun
	Deliver []Deliver
	Append  *Append
	// Sync asks for the thread's last sequence, reported as Synced.
	Sync bool
	// Release asks the shell to release the claim, then stop;
	// ReleaseReason says why ("idle" or "shutdown").
	Release       bool
	ReleaseReason string
	// Stop asks the shell to stop; StopErr says why (ErrThreadBusy when a
	// newer claim fenced this one).
	Stop    bool
	StopErr error
}

// Empty reports whether r asks for nothing.
func (r Ready) Empty() bool {
	return len(r.Cancel) == 0 && len(r.Start) == 0 && len(r.Deliver) == 0 &&
		r.Append == nil && !r.Sync && !r.Release && !r.Stop
}

// RejectError is returned by Decide for an input that contradicts the core's
// state, such as output from a run it does not hold. The input is ignored.
type RejectError struct{ Reason string }

func (e *RejectError) Error() string { return "thread: rejected: " + e.Reason }

// ErrStopped is the stop reason when the holder gives the thread up itself.
var ErrStopped = errors.New("thread: stopped")

// Core is the pure state machine of one claim's holder. It does no I/O and
// reads no clock: the shell feeds it Inputs and carries out the Readys it
// returns, like etcd raft's Node and Ready.
type Core struct {
	cfg   Config
	claim events.Claim
	view  *projections.Thread

	appends  uint64  // appends made under this claim; names message ids
	inflight *Append // the append awaiting AppendDone
	syncing  bool    // a Sync awaiting Synced
	awaitSeq uint64  // plan only once the view reaches this sequence
	outbox   []Append
	started  map[string]bool // runs whose StartRun was issued
	finished map[string]bool // runs whose goroutine ended
	idle     int
	draining bool
	drainWhy string
	done     bool
}

// New returns the core of a fresh claim. history is the thread's log up to at
// least the claim's marker, as events.AcquireClaim returns it.
func New(cfg Config, c events.Claim, history []events.Envelope) *Core {
	core := &Core{
		cfg:      cfg,
		claim:    c,
		view:     projections.Fold(c.Thread, history),
		started:  make(map[string]bool),
		finished: make(map[string]bool),
		awaitSeq: c.Seq,
	}
	return core
}

// NewFromView returns the core of a fresh claim whose thread was folded up
// to view.LastSeq (a verified snapshot) and continues with history, which
// reaches at least the claim's marker. The core owns view from now on.
func NewFromView(cfg Config, c events.Claim, view *projections.Thread, history []events.Envelope) *Core {
	for i := range history {
		view.Apply(history[i])
	}
	return &Core{
		cfg:      cfg,
		claim:    c,
		view:     view,
		started:  make(map[string]bool),
		finished: make(map[string]bool),
		awaitSeq: c.Seq,
	}
}

// View returns the core's view of the thread. The caller must not change it.
func (c *Core) View() *projections.Thread { return c.view }

// Claim returns the claim the core holds.
func (c *Core) Claim() events.Claim { return c.claim }

// Done reports whether the core asked to stop.
func (c *Core) Done() bool { return c.done }

// Start returns the first Ready of a claim: abandon a run an older claim
// left, or plan.
func (c *Core) Start() Ready { return c.plan(Ready{}) }

// Decide applies one input and returns what the shell must do.
func (c *Core) Decide(in Input) (Ready, error) {
	if c.done {
		return Ready{}, nil
	}
	var rd Ready
	switch in := in.(type) {
	case Observed:
		rd = c.observe(in.Env)
	case AppendDone:
		if c.inflight == nil {
			return Ready{}, &RejectError{"append result with no append in flight"}
		}
		rd = c.appendDone(in)
	case Synced:
		c.syncing = false
		c.awaitSeq = max(c.awaitSeq, in.LastSeq)
	case RunOutput:
		if err := c.ownRun(in.RunID); err != nil {
			return Ready{}, err
		}
		c.enqueue(events.NewRunOutput(c.claim, time.Time{}, in.RunID, in.Text))
	case RunAsked:
		if err := c.ownRun(in.RunID); err != nil {
			return Ready{}, err
		}
		c.enqueue(events.NewRequestOpened(c.claim, time.Time{}, in.RunID, in.RequestID, in.Question))
	case RunFinished:
		c.finished[in.RunID] = true
		if err := c.ownRun(in.RunID); err != nil {
			return Ready{}, err
		}
		if in.Err != nil {
			c.enqueue(events.NewRunFailed(c.claim, time.Time{}, in.RunID, in.Err.Error()))
		} else {
			c.enqueue(events.NewRunCompleted(c.claim, time.Time{}, in.RunID, in.Output))
		}
	case LeaseLost:
		return c.stop(fmt.Errorf("%w: lease lost: %v", events.ErrThreadBusy, in.Err)), nil
	case Tick:
		if c.quiet() && len(c.view.Pending()) == 0 {
			c.idle++
		} else {
			c.idle = 0
		}
		if c.cfg.IdleTicks > 0 && c.idle >= c.cfg.IdleTicks && !c.draining {
			c.draining, c.drainWhy = true, "idle"
		}
	case Drain:
		c.draining, c.drainWhy = true, "shutdown"
	case Shutdown:
		c.draining, c.drainWhy = true, "shutdown"
		if r := c.ownActive(); r != "" {
			rd.Cancel = append(rd.Cancel, r)
		}
	default:
		return Ready{}, &RejectError{fmt.Sprintf("unknown input %T", in)}
	}
	if rd.Stop {
		return rd, nil
	}
	return c.plan(rd), nil
}

// quiet reports whether nothing is in flight or running.
func (c *Core) quiet() bool {
	return c.inflight == nil && !c.syncing && len(c.outbox) == 0 && c.view.ActiveRun == nil
}

func (c *Core) ownRun(id string) error {
	r := c.view.ActiveRun
	if r == nil || r.ID != id || r.ClaimSeq != c.claim.Seq {
		return &RejectError{fmt.Sprintf("run %s is not this claim's active run", id)}
	}
	return nil
}

// ownActive returns the id of the active run if this claim started it.
func (c *Core) ownActive() string {
	if r := c.view.ActiveRun; r != nil && r.ClaimSeq == c.claim.Seq {
		return r.ID
	}
	return ""
}

func (c *Core) nextMsgID() string {
	c.appends++
	return fmt.Sprintf("%s:%d:%d", c.claim.Thread, c.claim.Seq, c.appends)
}

func (c *Core) enqueue(ev *eventspb.Event) {
	ev.Time = nil // the shell stamps the time it sends at
	c.outbox = append(c.outbox, Append{Event: ev, MsgID: c.nextMsgID()})
}

func (c *Core) stop(err error) Ready {
	c.done = true
	rd := Ready{Stop: true, StopErr: err}
	if r := c.ownActive(); r != "" && !c.finished[r] {
		rd.Cancel = append(rd.Cancel, r)
	}
	return rd
}

func (c *Core) observe(env events.Envelope) Ready {
	if env.Seq <= c.view.LastSeq {
		return Ready{}
	}
	c.view.Apply(env)
	var rd Ready
	if len(c.outbox) > 0 && env.MsgID == c.outbox[0].MsgID {
		c.outbox = c.outbox[1:]
	}
	if env.Err != nil || env.Event == nil {
		return rd
	}
	ev := env.Event
	switch b := ev.Body.(type) {
	case *eventspb.Event_ThreadClaimed:
		if env.Seq != c.claim.Seq {
			return c.stop(fmt.Errorf("%w: claimed by %s at %d", events.ErrThreadBusy, b.ThreadClaimed.Holder, env.Seq))
		}
	case *eventspb.Event_ThreadReleased:
		if ev.ClaimSeq == c.claim.Seq {
			return c.stop(ErrStopped)
		}
	case *eventspb.Event_RunStarted:
		if ev.ClaimSeq == c.claim.Seq && !c.started[b.RunStarted.RunId] {
			c.started[b.RunStarted.RunId] = true
			rd.Start = append(rd.Start, c.startRun(b.RunStarted))
		}
	case *eventspb.Event_AnswerGiven:
		if ev.ClaimSeq == c.claim.Seq {
			rd.Deliver = append(rd.Deliver, Deliver{RunID: b.AnswerGiven.RunId, RequestID: b.AnswerGiven.RequestId, Message: c.message(b.AnswerGiven.MessageSeq)})
		}
	case *eventspb.Event_SteeringGiven:
		if ev.ClaimSeq == c.claim.Seq {
			rd.Deliver = append(rd.Deliver, Deliver{RunID: b.SteeringGiven.RunId, Message: c.message(b.SteeringGiven.MessageSeq)})
		}
	case *eventspb.Event_RunAbandoned:
		if b.RunAbandoned.StartedClaimSeq == c.claim.Seq && ev.ClaimSeq != c.claim.Seq {
			return c.stop(fmt.Errorf("%w: run %s abandoned by a newer claim", events.ErrThreadBusy, b.RunAbandoned.RunId))
		}
	}
	return rd
}

func (c *Core) startRun(rs *eventspb.RunStarted) StartRun {
	sr := StartRun{
		RunID:  rs.RunId,
		Token:  agent.Token{Thread: c.claim.Thread, ClaimSeq: c.claim.Seq, RunID: rs.RunId},
		Prompt: c.message(rs.PromptSeq),
	}
	for _, m := range c.view.Messages {
		if m.Seq >= rs.PromptSeq {
			break
		}
		sr.History = append(sr.History, toAgent(m))
	}
	return sr
}

func (c *Core) message(seq uint64) agent.Message {
	for _, m := range c.view.Messages {
		if m.Seq == seq {
			return toAgent(m)
		}
	}
	return agent.Message{Seq: seq}
}

func toAgent(m projections.Message) agent.Message {
	return agent.Message{Seq: m.Seq, ID: m.MessageID, Author: m.Author, Text: m.Text}
}

func (c *Core) appendDone(in AppendDone) Ready {
	c.inflight = nil
	switch {
	case in.Err == nil:
		c.awaitSeq = max(c.awaitSeq, in.Ack.Seq)
		return Ready{}
	case errors.Is(in.Err, events.ErrThreadBusy):
		// I4: a refused fenced write consumed nothing; the thread passes
		// to whoever holds it now.
		return c.stop(in.Err)
	default:
		// A refused compare-and-set, or an unknown outcome: catch up with
		// the log, then plan again from what it holds. An outbox entry that
		// did land is recognised by its message id.
		c.syncing = true
		return Ready{Sync: true}
	}
}

// plan adds the next append, if any, to rd. It appends only when nothing is
// in flight and the view holds everything this claim wrote.
func (c *Core) plan(rd Ready) Ready {
	if c.done || c.inflight != nil || c.syncing || c.view.LastSeq < c.awaitSeq {
		return rd
	}
	v := c.view
	if v.Claim.Seq != c.claim.Seq || v.Claim.Released {
		rd2 := c.stop(fmt.Errorf("%w: the claim at %d is not the newest", events.ErrThreadBusy, c.claim.Seq))
		rd2.Cancel = append(rd.Cancel, rd2.Cancel...)
		return rd2
	}
	if r := v.ActiveRun; r != nil && r.ClaimSeq != c.claim.Seq {
		return c.issue(rd, events.NewRunAbandoned(c.claim, time.Time{}, r.ID, r.ClaimSeq, "taken over"), events.Fenced(c.claim))
	}
	if len(c.outbox) > 0 {
		a := c.outbox[0]
		c.inflight = &Append{Event: a.Event, Check: events.ExpectLast(v.LastRunSubjectSeq), MsgID: a.MsgID}
		rd.Append = c.inflight
		return rd
	}
	active := c.ownActive()
	if active != "" && c.finished[active] {
		// The run's end is queued or landing; nothing to plan until it is.
		return rd
	}
	if c.draining {
		if active == "" {
			c.done = true
			rd.Release, rd.ReleaseReason, rd.Stop, rd.StopErr = true, c.drainWhy, true, ErrStopped
		}
		return rd
	}
	m, ok := v.OldestPending()
	if !ok {
		return rd
	}
	switch {
	case active != "":
		if reqs := v.OpenRequests(); len(reqs) > 0 {
			return c.issue(rd, events.NewAnswerGiven(c.claim, time.Time{}, active, reqs[0].ID, m.Seq), events.Fenced(c.claim))
		}
		if c.cfg.Steerable {
			return c.issue(rd, events.NewSteeringGiven(c.claim, time.Time{}, active, m.Seq), events.Fenced(c.claim))
		}
		return rd
	case v.ActiveRun == nil:
		id := fmt.Sprintf("run-%d-%d", m.Seq, c.claim.Seq)
		return c.issue(rd, events.NewRunStarted(c.claim, time.Time{}, id, m.Seq, c.cfg.Agent), events.Fenced(c.claim))
	}
	return rd
}

func (c *Core) issue(rd Ready, ev *eventspb.Event, chk events.Check) Ready {
	ev.Time = nil
	c.inflight = &Append{Event: ev, Check: chk, MsgID: c.nextMsgID()}
	rd.Append = c.inflight
	return rd
}
