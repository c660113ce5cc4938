package thread

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections"
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
	// MaxEventBytes is the store's limit on an encoded event (see
	// [MaxEventBytesOf]). Longer run output is split into several
	// run_output events that each fit, with room left for the envelope.
	// Default events.DefaultMaxEventBytes.
	MaxEventBytes int
	// HistoryWindow is the most messages a run is given as its history,
	// and the most entries of its conversation: the newest before its
	// prompt, so a turn costs the same however long the thread. The core
	// keeps none of it: the shell reads it from the log ([HistoryFrom]).
	// 0 means DefaultHistoryWindow; negative gives the whole thread.
	HistoryWindow int
}

// DefaultHistoryWindow is [Config.HistoryWindow]'s default.
const DefaultHistoryWindow = 256

func (c Config) historyWindow() int {
	if c.HistoryWindow == 0 {
		return DefaultHistoryWindow
	}
	return c.HistoryWindow
}

// MaxEventBytesOf returns the event size limit of store when it reports one
// through a MaxEventBytes() int method (natsstore and memstore do), or
// events.DefaultMaxEventBytes.
func MaxEventBytesOf(store any) int {
	if s, ok := store.(interface{ MaxEventBytes() int }); ok && s.MaxEventBytes() > 0 {
		return s.MaxEventBytes()
	}
	return events.DefaultMaxEventBytes
}

// Append is an append the shell must make, with the check it carries. The
// shell sends it as is, with MsgID as its Nats-Msg-Id, and reports the
// result as [AppendDone].
type Append struct {
	Event *eventspb.Event
	Check events.Check
	MsgID string
	// Retry counts the earlier sends of this append whose outcome was
	// unknown: the shell waits a backoff before sending it again.
	Retry int
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
	// Steered lists runs whose steering ask ([RunSteer]) is answered, once
	// per ask, in the order asked: all the steering it got is in Deliver,
	// of this Ready or earlier ones.
	Steered []string
	Append  *Append
	// Sync asks for the thread's last sequence, reported as Synced.
	Sync bool
	// Release, when set, asks the shell to release the claim as it says,
	// then stop.
	Release *Release
	// Stop asks the shell to stop; StopErr says why (ErrThreadBusy when a
	// newer claim fenced this one).
	Stop    bool
	StopErr error
	// Anomalies are what the core saw and did not act on: run events under
	// this claim that it did not write, and appends the store refused for
	// good. The shell logs each as a warning.
	Anomalies []Anomaly
}

// Release is how a holder gives its claim up: the decision is the core's,
// the writes the shell's.
type Release struct {
	// Reason says why: "idle" or "shutdown".
	Reason string
	// KeepLease: a shutdown leaves messages pending. Only the marker is
	// released (events.ReleaseMarker); the lease stays with the session,
	// whose close hands the thread to another runner at once. Never for a
	// handover (Drain.Handover), whose session does not close.
	KeepLease bool
	// Pending: messages were pending as the core let go; the thread must
	// be claimed again.
	Pending bool
	// LastPosted is the newest sequence on the posted subject the core
	// saw. A post after it came in while the core let go: the shell reads
	// the subject back after the release and looks at the thread again.
	LastPosted uint64
	// RunSeq is the run subject's last sequence as the core knows it: the
	// release's compare-and-set where markers are on the run subject
	// (events.Subjects.RunFence; events.ReleaseMarkerAt).
	RunSeq uint64
}

// Empty reports whether r asks for nothing.
func (r Ready) Empty() bool {
	return len(r.Cancel) == 0 && len(r.Start) == 0 && len(r.Deliver) == 0 && len(r.Steered) == 0 &&
		r.Append == nil && !r.Sync && r.Release == nil && !r.Stop && len(r.Anomalies) == 0
}

// Anomaly is something the core saw and did not act on.
type Anomaly struct {
	Seq    uint64      // the event's sequence; 0 for a refused append
	Type   events.Type // the event's type, when known
	MsgID  string      // the event's Nats-Msg-Id
	Reason string
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
	// unsettled is an append whose outcome was unknown, to send again
	// once a sync shows it did not land (appendDone).
	unsettled *Append
	// refusedAt is the run-subject sequence a refused compare-and-set
	// expected (appendDone), checked once the view has caught up (plan).
	refusedAt *uint64
	syncing   bool   // a Sync awaiting Synced
	awaitSeq  uint64 // plan only once the view reaches this sequence
	outbox    []Append
	started   map[string]bool // runs whose StartRun was issued
	finished  map[string]bool // runs whose goroutine ended
	alive     map[string]bool // runs started and not finished
	// ending holds runs whose end the core decided itself (an append of
	// theirs was refused for good): their later reports are ignored.
	ending map[string]bool
	// cancelled holds runs whose cancel, asked by cancel_requested or
	// run_interrupted, was issued (strategy.go).
	cancelled map[string]bool
	// mine holds the appends this claim made that the view has not seen
	// yet, by message id: only they may act (Spec: the runtime acts only on
	// its own writes).
	mine map[string]*eventspb.Event
	// stored is this claim's last append the store acked as new, not a
	// duplicate: the message at that sequence is the one sent, byte for
	// byte, so reading it back needs no comparison.
	stored struct {
		msgID string
		seq   uint64
	}
	// steerAsk is the run whose steering ask is open, "" for none, and
	// steerGiven the steering given to it so far.
	steerAsk   string
	steerGiven int
	anomalies  []Anomaly
	early      Ready // what the history after the marker asked for, for Start
	idle       int
	draining   bool
	drainWhy   string
	handover   bool // a Drain said Handover: the lease goes with the claim
	done       bool
}

// New returns the core of a fresh claim. history is the thread's log up to at
// least the claim's marker, as events.AcquireClaim returns it.
func New(cfg Config, c events.Claim, history []events.Envelope) *Core {
	return NewFromView(cfg, c, projections.New(c.Thread), history)
}

// NewFromView returns the core of a fresh claim whose thread was folded up
// to view.LastSeq (a verified snapshot) and continues with history, which
// reaches at least the claim's marker, as [New] does with the empty view.
// The core owns view from now on.
func NewFromView(cfg Config, c events.Claim, view *projections.Thread, history []events.Envelope) *Core {
	if cfg.MaxEventBytes <= 0 {
		cfg.MaxEventBytes = events.DefaultMaxEventBytes
	}
	core := &Core{
		cfg:      cfg,
		claim:    c,
		view:     view,
		started:  make(map[string]bool),
		finished: make(map[string]bool),
		ending:   make(map[string]bool),
		alive:    make(map[string]bool),
		mine:     make(map[string]*eventspb.Event),
		awaitSeq: c.Seq,

		cancelled: make(map[string]bool),
	}
	// The log up to the marker is folded as it stands; what came after it
	// is observed, so that run events this holder did not write are not
	// acted on there either. Start returns what that asked for.
	for i, env := range history {
		if env.Seq <= c.Seq {
			core.view.Apply(env)
			if i%1024 == 1023 {
				core.view.Compact() // a long replay holds no more than the view
			}
			continue
		}
		rd := core.observe(env)
		core.early.Anomalies = append(core.early.Anomalies, rd.Anomalies...)
		if rd.Stop {
			rd.Anomalies = core.early.Anomalies
			core.early = rd
		}
	}
	return core
}

// Anomalies returns what the core saw and did not act on, oldest first:
// the same entries the Readys reported.
func (c *Core) Anomalies() []Anomaly { return append([]Anomaly(nil), c.anomalies...) }

// View returns the core's view of the thread. The caller must not change it.
func (c *Core) View() *projections.Thread { return c.view }

// Describe says what the core waits for, for diagnostics.
func (c *Core) Describe() string {
	inflight := "none"
	if a := c.inflight; a != nil {
		inflight = fmt.Sprintf("%s(retry %d)", events.TypeOf(a.Event), a.Retry)
	}
	return fmt.Sprintf("core(claim=%d done=%v draining=%v inflight=%s syncing=%v await=%d view=%d active=%q alive=%d outbox=%d pending=%d)",
		c.claim.Seq, c.done, c.draining, inflight, c.syncing, c.awaitSeq, c.view.LastSeq, c.ownActive(), len(c.alive), len(c.outbox), len(c.view.Pending()))
}

// Behind reports the span of the log the core waits to see: its view ends
// at last, and it plans only once the view reaches await (its own appends,
// or the log read by a sync). ok is false when it waits for nothing.
func (c *Core) Behind() (last, await uint64, ok bool) {
	if c.done || c.syncing || c.view.LastSeq >= c.awaitSeq {
		return 0, 0, false
	}
	return c.view.LastSeq, c.awaitSeq, true
}

// Claim returns the claim the core holds.
func (c *Core) Claim() events.Claim { return c.claim }

// Done reports whether the core asked to stop.
func (c *Core) Done() bool { return c.done }

// Start returns the first Ready of a claim: abandon a run an older claim
// left, or plan.
func (c *Core) Start() Ready {
	rd := c.early
	c.early = Ready{}
	if !c.done {
		rd = c.plan(rd)
	}
	c.compact()
	return rd
}

// Decide applies one input and returns what the shell must do. A
// [RejectError] says the input was not acted on; the Ready that comes with
// it must still be carried out (the end of a run the core no longer holds
// frees it to plan the next).
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
		if err := c.liveRun(in.RunID); err != nil {
			return Ready{}, err
		}
		c.enqueueOutput(in.RunID, in.Text)
	case RunAsked:
		if err := c.liveRun(in.RunID); err != nil {
			return Ready{}, err
		}
		c.enqueue(events.NewRequestOpened(c.claim, time.Time{}, in.RunID, in.RequestID, in.Question))
	case RunSteer:
		if err := c.liveRun(in.RunID); err != nil {
			return Ready{}, err
		}
		if c.steerAsk != "" {
			rd.Steered = append(rd.Steered, c.steerAsk) // one answer per ask
		}
		c.steerAsk, c.steerGiven = in.RunID, 0
	case RunFinished:
		c.finished[in.RunID] = true
		delete(c.alive, in.RunID)
		if err := c.liveRun(in.RunID); err != nil {
			// Its end is not written, but its goroutine is gone: a run
			// that waited for it may start now, not at the next tick.
			rd = c.plan(rd)
			c.compact()
			return rd, err
		}
		c.enqueueEnd(in.RunID, in.Output, c.endErr(in.Err))
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
		c.handover = c.handover || in.Handover
	case RememberID:
		c.view.RememberID(in.ID)
	case Shutdown:
		c.draining, c.drainWhy = true, "shutdown"
		if r := c.ownActive(); r != "" {
			rd.Cancel = append(rd.Cancel, r)
		}
	default:
		return Ready{}, &RejectError{fmt.Sprintf("unknown input %T", in)}
	}
	if rd.Stop {
		c.compact()
		return rd, nil
	}
	rd = c.plan(rd)
	c.compact()
	return rd, nil
}

// compact forgets what no decision needs, once the Ready that needed it
// (a prompt, a delivered message) is made: the view keeps the pending
// messages and the newest run (projections.Thread.Compact), and the
// core its runs that are neither active nor running.
func (c *Core) compact() {
	c.view.Compact()
	if len(c.started) <= 1 {
		return
	}
	active := ""
	if r := c.view.ActiveRun; r != nil {
		active = r.ID
	}
	for id := range c.started {
		if id != active && !c.alive[id] {
			delete(c.started, id)
			delete(c.finished, id)
			delete(c.ending, id)
			delete(c.cancelled, id)
		}
	}
}

// quiet reports whether nothing is in flight or running.
func (c *Core) quiet() bool {
	return c.inflight == nil && !c.syncing && len(c.outbox) == 0 && c.view.ActiveRun == nil
}

// liveRun checks that id is this claim's active run and that its end is
// not decided yet.
func (c *Core) liveRun(id string) error {
	r := c.view.ActiveRun
	switch {
	case r == nil || r.ID != id || r.ClaimSeq != c.claim.Seq:
		return &RejectError{fmt.Sprintf("run %s is not this claim's active run", id)}
	case c.ending[id]:
		return &RejectError{fmt.Sprintf("run %s is ending: an append of it was refused", id)}
	}
	return nil
}

// running reports whether a run this core started has not reported its end:
// its goroutine may still act, so no other run starts.
func (c *Core) running() bool { return len(c.alive) > 0 }

// ownActive returns the id of the active run if this claim started it: a
// run_started under this claim that it did not write is not its run.
func (c *Core) ownActive() string {
	if r := c.view.ActiveRun; r != nil && r.ClaimSeq == c.claim.Seq && c.started[r.ID] {
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
	a := Append{Event: ev, MsgID: c.nextMsgID()}
	c.mine[a.MsgID] = ev
	c.outbox = append(c.outbox, a)
}

// envelopeSlack is room left in an event for what the core does not see
// when it sizes a text: the timestamp the shell stamps (at most 19 bytes)
// and the text field's tag and length (at most 6).
const envelopeSlack = 64

// room returns how many bytes of text fit in ev, whose text is empty,
// under the store's limit.
func (c *Core) room(ev *eventspb.Event) int {
	return max(c.cfg.MaxEventBytes-proto.Size(ev)-envelopeSlack, utf8.UTFMax)
}

// enqueueOutput queues text as run_output events, as many as it takes for
// each to fit the store's limit.
func (c *Core) enqueueOutput(run, text string) {
	n := c.room(events.NewRunOutput(c.claim, time.Time{}, run, ""))
	for _, part := range splitText(text, n) {
		c.enqueue(events.NewRunOutput(c.claim, time.Time{}, run, part))
	}
}

// enqueueEnd queues the run's end. A final output too long for one event is
// written as run_output events, then run_completed with an empty output,
// so it is delivered rather than failed; a failure reason too long is cut.
func (c *Core) enqueueEnd(run, output string, err error) {
	if err != nil {
		ev := events.NewRunFailed(c.claim, time.Time{}, run, "")
		ev.GetRunFailed().Reason = cut(err.Error(), c.room(ev))
		c.enqueue(ev)
		return
	}
	ev := events.NewRunCompleted(c.claim, time.Time{}, run, "")
	if len(output) > c.room(ev) {
		c.enqueueOutput(run, output)
		output = ""
	}
	ev.GetRunCompleted().Output = output
	c.enqueue(ev)
}

// splitText splits s into parts of at most n bytes, at UTF-8 boundaries, so
// that each stays valid text. Joined without a separator they are s.
func splitText(s string, n int) []string {
	n = max(n, utf8.UTFMax) // room for any rune: every part makes progress
	if len(s) <= n {
		return []string{s}
	}
	var parts []string
	for len(s) > n {
		i := n
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		if i == 0 {
			i = n // no rune starts in reach: not UTF-8 anyway
		}
		parts = append(parts, s[:i])
		s = s[i:]
	}
	return append(parts, s)
}

// cut shortens s to at most n bytes, saying how much it dropped.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	note := fmt.Sprintf(" ... (%d bytes cut)", len(s))
	return splitText(s, n-len(note))[0] + note
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
	var rd Ready
	if reason := c.foreign(&env); reason != "" {
		if consuming(&env) {
			return c.observeForeignConsumer(env, reason)
		}
		// Not this holder's write: the view counts its sequence (the
		// store's checks do) but not its body, so it starts, ends or
		// feeds no run here.
		an := Anomaly{Seq: env.Seq, Type: env.Type, MsgID: env.MsgID, Reason: reason + "; ignored"}
		c.anomalies = append(c.anomalies, an)
		rd.Anomalies = append(rd.Anomalies, an)
		env.Err = errors.New("thread: " + an.Reason)
		c.view.Apply(env)
		return rd
	}
	delete(c.mine, env.MsgID)
	c.view.Apply(env)
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
			c.alive[b.RunStarted.RunId] = true
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

// foreign returns why env, a run-subject event after this claim's marker,
// was not written by this holder, or "" when it was or is not such an
// event. While the marker is the newest, the holder is the only writer of
// the run subject, with one exception: the run an older claim started may
// still record its own output, requests and end until this holder's
// run_abandoned lands. An append is this holder's when its message id is
// one it used and its event is the one it sent: message ids can be
// guessed, so a forger could take one first.
func (c *Core) foreign(env *events.Envelope) string {
	kind := env.Kind
	if kind == "" {
		kind = events.TypeOf(env.Event).Kind()
	}
	if kind != events.KindRun || env.Seq <= c.claim.Seq {
		return ""
	}
	ev := env.Event
	if events.TypeOf(ev).Marker() {
		// A marker: on the run subject under RUNFENCE
		// (events.Subjects.RunFence). It is the claim protocol's, no
		// holder's write, and observe stops on it as on the claim
		// subject; ignored as foreign, the view would count its
		// sequence (K) and not the newer claim.
		return ""
	}
	if sent, ok := c.mine[env.MsgID]; ok && env.Err == nil && ev != nil {
		if (env.Seq == c.stored.seq && env.MsgID == c.stored.msgID) || sameEvent(ev, sent) {
			return ""
		}
		// Someone else stored an event under this holder's message id:
		// send ours again under a fresh one, or the store would take it
		// for a duplicate of theirs.
		if len(c.outbox) > 0 && c.outbox[0].MsgID == env.MsgID {
			delete(c.mine, env.MsgID)
			c.outbox[0].MsgID = c.nextMsgID()
			c.mine[c.outbox[0].MsgID] = c.outbox[0].Event
		}
		return fmt.Sprintf("%s at %d reuses this holder's message id %q with another event", env.Type, env.Seq, env.MsgID)
	}
	if r := c.view.ActiveRun; r != nil && ev != nil && env.Err == nil && r.ClaimSeq < c.claim.Seq && ev.ClaimSeq == r.ClaimSeq {
		switch b := ev.Body.(type) {
		case *eventspb.Event_RunOutput:
			if b.RunOutput.RunId == r.ID {
				return ""
			}
		case *eventspb.Event_RequestOpened:
			if b.RequestOpened.RunId == r.ID {
				return ""
			}
		case *eventspb.Event_RunCompleted:
			if b.RunCompleted.RunId == r.ID {
				return ""
			}
		case *eventspb.Event_RunFailed:
			if b.RunFailed.RunId == r.ID {
				return ""
			}
		case *eventspb.Event_RunInterrupted:
			if b.RunInterrupted.RunId == r.ID {
				return ""
			}
		}
	}
	return fmt.Sprintf("%s at %d under claim %d (msg id %q) was not written by this holder (claim %d)",
		orUnknown(env.Type), env.Seq, ev.GetClaimSeq(), env.MsgID, c.claim.Seq)
}

// consuming reports whether env is a well-formed run_started, answer_given
// or steering_given: an event that consumes a message.
func consuming(env *events.Envelope) bool {
	if env.Err != nil || env.Event == nil {
		return false
	}
	switch env.Event.GetBody().(type) {
	case *eventspb.Event_RunStarted, *eventspb.Event_AnswerGiven, *eventspb.Event_SteeringGiven:
		return true
	}
	return false
}

// observeForeignConsumer folds a consuming event this holder did not write
// as it stands: the log is the truth, and its message is consumed whoever
// consumed it (I1: this holder must never run or give it again).
//   - A run_started starts no agent: its run becomes the active run, which
//     plan abandons (fenced). A run of this holder's it displaced is no
//     longer active in the log, so it is cancelled and nothing more of it
//     is written.
//   - An answer or steering that the log gives to this holder's active run
//     (the fold accepted it) is delivered to it, as the log says, so that
//     the run does not wait for a message it was given; any other changes
//     nothing but the consumption.
func (c *Core) observeForeignConsumer(env events.Envelope, reason string) Ready {
	own := c.ownActive()
	c.view.Apply(env)
	an := Anomaly{Seq: env.Seq, Type: env.Type, MsgID: env.MsgID, Reason: reason + "; its message counts as consumed"}
	rd := Ready{Anomalies: []Anomaly{an}}
	if d, ok := c.givenToOwn(env, own); ok {
		rd.Deliver = append(rd.Deliver, d)
		rd.Anomalies[0].Reason += ", and is given to run " + own + " as the log says"
	}
	if own != "" && c.ownActive() != own {
		rd.Anomalies[0].Reason += fmt.Sprintf(", and run %s, which it displaced, is given up", own)
		c.dropRun(own)
		if !c.finished[own] {
			rd.Cancel = append(rd.Cancel, own)
		}
	}
	c.anomalies = append(c.anomalies, rd.Anomalies...)
	return rd
}

// givenToOwn returns the delivery of env, an answer_given or
// steering_given just folded, when it consumed its message for run own,
// this holder's active run, as an answer to one of its open requests or
// as steering it takes.
func (c *Core) givenToOwn(env events.Envelope, own string) (Deliver, bool) {
	if own == "" || c.ownActive() != own {
		return Deliver{}, false
	}
	var seq uint64
	var d Deliver
	switch b := env.Event.GetBody().(type) {
	case *eventspb.Event_AnswerGiven:
		q := c.view.Requests[b.AnswerGiven.GetRequestId()]
		if b.AnswerGiven.GetRunId() != own || q == nil || q.RunID != own || q.AnswerSeq != env.Seq {
			return Deliver{}, false
		}
		seq, d = b.AnswerGiven.GetMessageSeq(), Deliver{RunID: own, RequestID: q.ID}
	case *eventspb.Event_SteeringGiven:
		if b.SteeringGiven.GetRunId() != own || !c.cfg.Steerable {
			return Deliver{}, false
		}
		seq, d = b.SteeringGiven.GetMessageSeq(), Deliver{RunID: own}
	default:
		return Deliver{}, false
	}
	i, ok := slices.BinarySearchFunc(c.view.Messages, seq, func(m projections.Message, s uint64) int { return cmp.Compare(m.Seq, s) })
	if !ok || c.view.Messages[i].Consumed == nil || c.view.Messages[i].Consumed.Seq != env.Seq {
		return Deliver{}, false // it consumed nothing: the message was taken before
	}
	d.Message = toAgent(c.view.Messages[i])
	return d, true
}

// dropRun forgets the queued appends of run, whose later reports are
// ignored: it is no longer active.
func (c *Core) dropRun(run string) {
	keep := c.outbox[:0]
	for _, o := range c.outbox {
		if runOf(o.Event) != run {
			keep = append(keep, o)
		} else {
			delete(c.mine, o.MsgID)
		}
	}
	c.outbox = keep
	c.ending[run] = true
}

func orUnknown(t events.Type) events.Type {
	if t == "" {
		return "event of unknown type"
	}
	return t
}

func (c *Core) startRun(rs *eventspb.RunStarted) StartRun {
	sr := StartRun{
		RunID:  rs.RunId,
		Token:  agent.Token{Thread: c.claim.Thread, ClaimSeq: c.claim.Seq, RunID: rs.RunId},
		Prompt: c.message(rs.PromptSeq),
		Window: c.cfg.historyWindow(),
		Forked: c.view.Fork != nil,
	}
	if r := c.view.ActiveRun; r != nil && r.ID == rs.RunId {
		sr.StartSeq = r.StartSeq
	}
	if sr.Window > 0 {
		sr.Recent = c.view.RecentBefore(rs.PromptSeq, sr.Window)
	}
	return sr
}

// Conversation interleaves history, the messages before promptSeq, with the
// replies of the runs of v that ended before it and after from, by
// sequence: a reply stands at its run's end. A rolled-back run's reply is
// left out, as its messages are from history; a run with no text wrote no
// reply.
func Conversation(v *projections.Thread, history []agent.Message, promptSeq, from uint64) []agent.Message {
	var out []agent.Message
	i := 0
	for _, r := range v.Runs {
		if r.Status == projections.RunActive || r.RolledBack || r.PromptSeq >= promptSeq || r.EndSeq < from {
			continue
		}
		text := r.Reply()
		if text == "" {
			continue
		}
		for i < len(history) && history[i].Seq < r.EndSeq {
			out = append(out, history[i])
			i++
		}
		out = append(out, agent.Message{Seq: r.EndSeq, Run: r.ID, Author: "assistant", Text: text})
	}
	return append(out, history[i:]...)
}

func (c *Core) message(seq uint64) agent.Message {
	ms := c.view.Messages
	if i, ok := slices.BinarySearchFunc(ms, seq, func(m projections.Message, s uint64) int { return cmp.Compare(m.Seq, s) }); ok {
		return toAgent(ms[i])
	}
	return agent.Message{Seq: seq}
}

func toAgent(m projections.Message) agent.Message {
	return agent.Message{Seq: m.Seq, ID: m.MessageID, Author: m.Author, Text: m.Text, Assistant: m.Assistant}
}

func (c *Core) appendDone(in AppendDone) Ready {
	a := *c.inflight
	c.inflight = nil
	switch {
	case in.Err == nil:
		c.awaitSeq = max(c.awaitSeq, in.Ack.Seq)
		if !in.Ack.Duplicate {
			c.stored.msgID, c.stored.seq = a.MsgID, in.Ack.Seq
		}
		return Ready{}
	case errors.Is(in.Err, events.ErrThreadBusy):
		// I4: a refused fenced write consumed nothing; the thread passes
		// to whoever holds it now.
		return c.stop(in.Err)
	case permanent(in.Err):
		return c.refused(a, in.Err)
	case c.draining && errors.Is(in.Err, events.ErrNoStorage):
		// Stopping on a full store: what is left cannot be written now,
		// and waiting would only delay the stop. The claim lapses with
		// the session, and the next holder abandons what was left.
		typ := events.TypeOf(a.Event)
		an := Anomaly{Type: typ, MsgID: a.MsgID, Reason: fmt.Sprintf("%s not written on the way out: %v", typ, in.Err)}
		c.anomalies = append(c.anomalies, an)
		rd := c.stop(fmt.Errorf("thread: %s not written: %w", typ, in.Err))
		rd.Anomalies = append(rd.Anomalies, an)
		return rd
	case errors.Is(in.Err, events.ErrConflict) || errors.Is(in.Err, events.ErrRunMoved):
		// A refused compare-and-set: nothing was written, and nothing
		// will be. Catch up with the log, then plan again from what it
		// holds.
		if seq, ok := expectedRunSeq(a.Check); ok {
			c.refusedAt = &seq
		}
		c.syncing = true
		return Ready{Sync: true}
	default:
		// An unknown outcome. Catch up with the log: if the append landed,
		// the view holds it, and planning goes on from there. If it did
		// not, it may still land after the read (a replicated stream's
		// proposal committed by the next leader), and replanning past it
		// could release the claim under a run it started. So it is sent
		// again, the same event with the same check and message id
		// (DESIGN §3), until the store gives a verdict: a resend is
		// ordered after the first send, which then either landed (a
		// duplicate ack, or a refusal that natsstore reads back to our
		// id) or never will (the resend lands or is refused, and the
		// first, checking the same subjects, would be refused too). The
		// read comes first because the deduplication window is finite:
		// a resend long after a send that landed could land again.
		a.Retry++
		c.unsettled = &a
		c.syncing = true
		return Ready{Sync: true}
	}
}

// permanent reports whether an append error will come back however often
// the append is retried: nothing was written, and nothing will be.
func permanent(err error) bool {
	return errors.Is(err, events.ErrTooLarge) || errors.Is(err, events.ErrInvalidEvent) ||
		errors.Is(err, events.ErrInvalidThreadID)
}

// shortReason bounds the reasons the core writes itself: a run_failed
// this short that the store refuses cannot be written at all.
const shortReason = 1024

// refused handles an append the store refused for good. A run's output,
// request or completion, or its failure with a long reason, ends the run as
// run_failed with the store's reason, which names the size and the limit,
// and the thread goes on. Anything else cannot be written in another form:
// the holder stops, and the next claimant abandons whatever run is left.
func (c *Core) refused(a Append, err error) Ready {
	typ := events.TypeOf(a.Event)
	delete(c.mine, a.MsgID)
	an := Anomaly{Type: typ, MsgID: a.MsgID, Reason: fmt.Sprintf("%s refused by the store: %v", typ, err)}
	c.anomalies = append(c.anomalies, an)
	fromOutbox := len(c.outbox) > 0 && c.outbox[0].MsgID == a.MsgID
	run := runOf(a.Event)
	if !fromOutbox || run == "" || run != c.ownActive() ||
		(typ == events.TypeRunFailed && len(a.Event.GetRunFailed().GetReason()) <= shortReason) {
		rd := c.stop(fmt.Errorf("thread: %s cannot be written: %w", typ, err))
		rd.Anomalies = append(rd.Anomalies, an)
		return rd
	}
	// Drop the run's queued appends and record its end instead.
	keep := c.outbox[:0]
	for _, o := range c.outbox {
		if runOf(o.Event) != run {
			keep = append(keep, o)
		} else {
			delete(c.mine, o.MsgID)
		}
	}
	c.outbox = keep
	c.ending[run] = true
	c.enqueueEnd(run, "", fmt.Errorf("thread: %s not written: %w", typ, err))
	rd := Ready{Anomalies: []Anomaly{an}}
	if !c.finished[run] {
		rd.Cancel = append(rd.Cancel, run)
	}
	return rd
}

// runOf returns the run id of a run_output, request_opened, run_completed
// or run_failed, or "".
func runOf(ev *eventspb.Event) string {
	switch b := ev.GetBody().(type) {
	case *eventspb.Event_RunOutput:
		return b.RunOutput.GetRunId()
	case *eventspb.Event_RequestOpened:
		return b.RequestOpened.GetRunId()
	case *eventspb.Event_RunCompleted:
		return b.RunCompleted.GetRunId()
	case *eventspb.Event_RunFailed:
		return b.RunFailed.GetRunId()
	}
	return ""
}

// plan adds the next append, if any, to rd. It appends only when nothing is
// in flight and the view holds everything this claim wrote.
func (c *Core) plan(rd Ready) Ready {
	rd = c.maybeCancel(rd)
	if c.done || c.inflight != nil || c.syncing || c.view.LastSeq < c.awaitSeq {
		return rd
	}
	v := c.view
	if v.Claim.Seq != c.claim.Seq || v.Claim.Released {
		rd2 := c.stop(fmt.Errorf("%w: the claim at %d is not the newest", events.ErrThreadBusy, c.claim.Seq))
		rd2.Cancel = append(rd.Cancel, rd2.Cancel...)
		return rd2
	}
	if at := c.refusedAt; at != nil {
		c.refusedAt = nil
		if *at == v.LastRunSubjectSeq {
			return c.viewHole(rd, *at)
		}
	}
	if u := c.unsettled; u != nil {
		c.unsettled = nil
		if _, unseen := c.mine[u.MsgID]; unseen {
			c.inflight = u
			rd.Append = u
			return rd
		}
		// It landed: the view holds it.
	}
	if r := v.ActiveRun; r != nil && r.ClaimSeq != c.claim.Seq {
		return c.issue(rd, events.NewRunAbandoned(c.claim, time.Time{}, r.ID, r.ClaimSeq, "taken over"), c.fence())
	}
	if r := v.ActiveRun; r != nil && !c.started[r.ID] {
		// A run_started under this claim that this holder did not write:
		// no agent of ours runs it.
		return c.issue(rd, events.NewRunAbandoned(c.claim, time.Time{}, r.ID, r.ClaimSeq, "not started by this claim's holder"), c.fence())
	}
	if len(c.outbox) > 0 {
		a := c.outbox[0]
		c.inflight = &Append{Event: a.Event, Check: events.ExpectLast(v.LastRunSubjectSeq), MsgID: a.MsgID}
		rd.Append = c.inflight
		return rd
	}
	rd = c.next(rd)
	if c.steerAsk != "" && rd.Append == nil {
		// Nothing more to give: answer the ask with what it got.
		rd.Steered = append(rd.Steered, c.steerAsk)
		c.steerAsk = ""
	}
	return rd
}

// viewHole stops a core whose view lacks an event of the log: the store
// refused a compare-and-set that expected the run subject to end at at,
// so an event past it was stored before the refusal, and the view, caught
// up with the log read after it, still ends its run subject at at. Its
// events reached it with one missing; planning from it would repeat the
// refused write, and a release from it could leave a run active. A new
// claim reads the thread afresh.
func (c *Core) viewHole(rd Ready, at uint64) Ready {
	an := Anomaly{Seq: c.view.LastSeq, Reason: fmt.Sprintf(
		"the store refused a write that expected the run subject to end at %d, and the view, caught up to %d, ends it there: it lacks a stored event; stopping for a fresh claim",
		at, c.view.LastSeq)}
	c.anomalies = append(c.anomalies, an)
	rd2 := c.stop(fmt.Errorf("thread: %s", an.Reason))
	rd2.Cancel = append(rd.Cancel, rd2.Cancel...)
	rd2.Anomalies = append(append(rd.Anomalies, rd2.Anomalies...), an)
	return rd2
}

// expectedRunSeq returns the run-subject sequence chk expects: the
// guard's, or a compare-and-set's on the event's own subject, the run
// subject for every append the core checks that way.
func expectedRunSeq(chk events.Check) (uint64, bool) {
	switch {
	case chk.Mode == events.CheckFence && chk.Guarded:
		return chk.RunSeq, true
	case chk.Mode == events.CheckSubject:
		return chk.Seq, true
	}
	return 0, false
}

// maxSteerPerAsk bounds the steering one ask takes, so that a flood of
// posts cannot keep an agent's Steer from returning.
const maxSteerPerAsk = 64

// next adds the append that consumes the next pending message, or the
// release, to rd: the view holds everything this claim wrote.
func (c *Core) next(rd Ready) Ready {
	v := c.view
	active := c.ownActive()
	if active != "" && c.finished[active] {
		// The run's end is queued or landing; nothing to plan until it is.
		return rd
	}
	if c.draining {
		if active == "" {
			c.done = true
			rd.Release, rd.Stop, rd.StopErr = c.release(), true, ErrStopped
		}
		return rd
	}
	if active != "" && c.cancelled[active] {
		// Its end is coming; it takes no more messages.
		return rd
	}
	m, ok := v.OldestPending()
	if !ok {
		return rd
	}
	switch {
	case active != "":
		if reqs := v.OpenRequests(); len(reqs) > 0 {
			return c.issue(rd, events.NewAnswerGiven(c.claim, time.Time{}, active, reqs[0].ID, m.Seq), c.fence())
		}
		if by, ok := c.interrupter(); ok {
			return c.issue(rd, events.NewRunInterrupted(c.claim, time.Time{}, active, by.Seq, v.StrategyOf(by) == events.StrategyRollback),
				events.ExpectLast(v.LastRunSubjectSeq))
		}
		if c.cfg.Steerable && c.steerAsk == active && c.steerGiven < maxSteerPerAsk {
			c.steerGiven++
			return c.issue(rd, events.NewSteeringGiven(c.claim, time.Time{}, active, m.Seq), c.fence())
		}
		return rd
	case v.ActiveRun == nil && !c.running():
		id := fmt.Sprintf("run-%d-%d", m.Seq, c.claim.Seq)
		return c.issue(rd, events.NewRunStarted(c.claim, time.Time{}, id, m.Seq, c.cfg.Agent), c.fence())
	}
	return rd
}

// release is the Release of a drained core.
func (c *Core) release() *Release {
	v := c.view
	pending := len(v.Pending()) > 0
	last := v.LastPostedSubjectSeq
	if n := len(v.Messages); n > 0 {
		// Events on the posted subject that are no messages (a cancel
		// request, thread_configured) are no work: a later post is.
		last = max(last, v.Messages[n-1].Seq)
	}
	return &Release{Reason: c.drainWhy, KeepLease: c.drainWhy == "shutdown" && pending && !c.handover, Pending: pending, LastPosted: last,
		RunSeq: v.LastRunSubjectSeq}
}

func (c *Core) issue(rd Ready, ev *eventspb.Event, chk events.Check) Ready {
	ev.Time = nil
	c.inflight = &Append{Event: ev, Check: chk, MsgID: c.nextMsgID()}
	c.mine[c.inflight.MsgID] = ev
	rd.Append = c.inflight
	return rd
}

// fence is the check of this holder's consuming writes and run_abandoned:
// the claim fence, guarded by the last run-subject sequence the view holds.
// A store that guards then refuses the write with events.ErrRunMoved when a
// run event this holder has not read landed first, such as a consuming
// event a writer with runner credentials forged under this claim; the core
// reads the log again (appendDone) and folds it, instead of writing a
// second consumption on top of it (issue 23: I1, I3).
func (c *Core) fence() events.Check {
	return events.FencedGuarded(c.claim, c.view.LastRunSubjectSeq)
}
