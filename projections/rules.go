package projections

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// This file holds the fold rules: what is malformed, what consumes a
// message, run transitions, requests and answers. Every fold of a thread's
// events uses them through [Step]: [Thread], the audit's compact state
// (projections/audit) and the thread summaries (projections/summaries).
// Each keeps its state its own way behind [State]; none has rules of its
// own, so they cannot drift apart.
//
// To add an event: add its case to [Rules], deciding from State's reads and
// recording through State's changes (add a change to State when no existing
// one fits, and implement it in the three folds, as bookkeeping only).

// MsgStatus is what a State knows of a message a consuming event names.
type MsgStatus uint8

// The message statuses.
const (
	// MsgNotPosted: no message was posted at that sequence in this thread.
	MsgNotPosted MsgStatus = iota
	// MsgPending: posted and not yet consumed.
	MsgPending
	// MsgConsumed: consumed already (I1).
	MsgConsumed
	// MsgTaken: at or before the taken cursor, and the State keeps no more
	// than that (the summaries forget consumed messages). It is refused,
	// as a consumed or unposted message is.
	MsgTaken
	// MsgReposted: a message_posted whose message id the thread had
	// already: not a message. By is the message that has the id.
	MsgReposted
)

// MsgInfo is what [State.MessageOf] returns.
type MsgInfo struct {
	Status MsgStatus
	Oldest bool   // MsgPending: it is the oldest pending message
	By     uint64 // MsgConsumed: the event that consumed it, when known
}

// ReqInfo is a request the active run opened, as [State.RequestOf] returns it.
type ReqInfo struct {
	Opened   uint64 // its request_opened, when known
	Answered bool
	AnswerAt uint64 // its accepted answer_given, when known
}

// Code names a rule an event broke, so that a fold can classify a
// [Finding] (the audit reports some as violations) without parsing its text.
type Code uint8

// The codes.
const (
	CodeMalformed        Code = iota + 1 // undecodable, or header or subject contradicts the body
	CodeOtherThread                      // an event of another thread
	CodeReleaseNotNewest                 // a release of a claim that is not the newest
	CodeReleasedAgain                    // a release of a released claim
	CodeReleaseHolder                    // a release by another holder
	CodeOneActiveRun                     // I3: a run started while another is active
	CodeNotPosted                        // a consuming event names a message not posted here
	CodeConsumedAgain                    // I1: a consuming event names a consumed message
	CodeTaken                            // a consuming event names a message at or before the taken cursor
	CodeNotOldest                        // a consumed message that is not the oldest pending one
	CodeNotActive                        // an event of a run that is not the active run
	CodeRequestReused                    // a request id the active run already opened
	CodeUnknownRequest                   // an answer to a request the active run did not open
	CodeAnsweredAgain                    // an answer to an answered request
	CodeAbandonClaim                     // an abandon whose started claim is not the run's
	CodeForkNotFirst                     // a thread_forked that is not the thread's first event
	CodeForkBody                         // a thread_forked whose copied history does not hold together
	CodeUnknownStrategy                  // a post or thread_configured naming no known strategy
	CodeInterruptedAgain                 // a run_interrupted of a run interrupted already
	CodeNotInterrupting                  // a run_interrupted naming a post whose strategy does not interrupt
	CodeBadMetadata                      // a thread_metadata whose metadata is not a JSON object
	CodeRunHolder                        // a run's unfenced event by another holder or claim than the run's
	CodeBadPost                          // a post no client writes: see PostFinding
	CodeReposted                         // a message_posted whose message id the thread has: not a message
	CodeIDConsumedAgain                  // I1: a consuming event names a repost of a consumed message's id
	CodeRepostConsumed                   // a consuming event names a repost of a pending message's id
	CodeAbandonOwn                       // an abandon of a run the newest claim started (AbandonOnlyOlder)
)

// Finding is an event a rule refused, in part or whole. Reason is one
// sentence; Run and Msg name the run and the message involved, if any.
type Finding struct {
	Code   Code
	Reason string
	Run    string
	Msg    uint64
}

// State is one thread's fold state as [Rules] sees it. The reads answer
// questions; the changes record what the rules decided and decide nothing.
// Every change is called only for an envelope of this thread that is not
// malformed, in stream order.
type State interface {
	// ThreadID is the thread's id.
	ThreadID() string
	// NewestClaim returns the newest claim marker's sequence (0 when none) and
	// whether it was released; IsHolder whether holder holds it, and Holder
	// its holder, for messages.
	NewestClaim() (seq uint64, released bool)
	IsHolder(holder string) bool
	ClaimHolder() string
	// Active returns the active run's run_started and the claim it started
	// under; ok is false when no run is active. IsActive reports whether run
	// is the active run's id, and ActiveID is that id, for messages.
	Active() (start, claim uint64, ok bool)
	IsActive(run string) bool
	ActiveID() string
	// IsRunHolder reports whether holder started the active run, and
	// RunHolder is that holder, for messages.
	IsRunHolder(holder string) bool
	RunHolder() string
	// LastRun returns the newest run's id, status and end (0 while
	// active); ok is false before the first run.
	LastRun() (id string, status RunStatus, end uint64, ok bool)
	// MessageOf says what is known of message seq.
	MessageOf(seq uint64) MsgInfo
	// RequestOf returns request id of the active run, if it opened one.
	RequestOf(id string) (ReqInfo, bool)
	// Fresh reports whether the thread has nothing yet: no message, run,
	// claim or fork, and nothing on its claim or run subjects.
	Fresh() bool
	// HasMessages reports whether a message was posted (or copied by a
	// fork). Strategy is the thread's double-texting strategy, "" when none
	// was set; MessageStrategy is the strategy message seq's post named,
	// ok false when the State does not know it.
	HasMessages() bool
	Strategy() events.Strategy
	MessageStrategy(seq uint64) (st events.Strategy, ok bool)
	// ActiveMarks returns the active run's cancel request and interrupt,
	// 0 when none.
	ActiveMarks() (cancelSeq, interruptSeq uint64)
	// PostedID returns the sequence of the message posted with message id
	// id, and whether there is one. Messages a fork copied do not count:
	// their ids are their source's. A State that keeps only whether an id
	// was posted returns seq 0 with ok true.
	PostedID(id string) (seq uint64, ok bool)

	// Seen records an envelope of this thread, malformed or not: its time,
	// and its subject's sequence (JetStream counts every message on a
	// subject in its expected-sequence checks, whatever its payload).
	Seen(env *events.Envelope, kind events.Kind)
	// Post records a posted message.
	Post(env *events.Envelope, b *eventspb.MessagePosted)
	// Reposted records a message_posted whose message id message orig
	// has: it is not a message, and MessageOf(env.Seq) says MsgReposted.
	Reposted(env *events.Envelope, orig uint64)
	// Claimed records a new claim marker held by holder.
	Claimed(env *events.Envelope, holder string, b *eventspb.ThreadClaimed)
	// Released records the newest claim's release.
	Released(env *events.Envelope)
	// Consume records that env consumed message seq, a pending message
	// (MessageOf said so), for run, as kind. Only the oldest pending
	// message moves the taken cursor, to the end of the consumed prefix: a
	// newer one named out of order leaves the older ones pending.
	Consume(env *events.Envelope, seq uint64, kind ConsumptionKind, run string)
	// StartRun makes the run b starts the active run.
	StartRun(env *events.Envelope, b *eventspb.RunStarted)
	// Output records an output of the active run.
	Output(env *events.Envelope, b *eventspb.RunOutput)
	// OpenRequest records a request of the active run.
	OpenRequest(env *events.Envelope, b *eventspb.RequestOpened)
	// Answered records the answer to an open request of the active run.
	Answered(env *events.Envelope, b *eventspb.AnswerGiven)
	// Steered records steering given to the active run.
	Steered(env *events.Envelope, b *eventspb.SteeringGiven)
	// EndRun ends the active run as status, closing its requests. output is
	// run_completed's, reason run_failed's or run_abandoned's.
	EndRun(env *events.Envelope, status RunStatus, output, reason string)
	// Forked records a thread_forked, the thread's first event, whose body
	// [ForkBodyError] accepts: the copied messages consumed by env, the
	// copied runs ended (see [Fork]).
	Forked(env *events.Envelope, b *eventspb.ThreadForked)
	// SetStrategy sets the thread's strategy (thread_configured, or its
	// first post). PostStrategy records the strategy the message posted
	// at env named.
	SetStrategy(env *events.Envelope, st events.Strategy)
	PostStrategy(env *events.Envelope, st events.Strategy)
	// Cancel records a cancel request of the active run.
	Cancel(env *events.Envelope)
	// Interrupt records the active run's run_interrupted.
	Interrupt(env *events.Envelope, b *eventspb.RunInterrupted)
	// SetMetadata merges keys, a thread_metadata's, into the thread's
	// metadata; created marks the thread's creation.
	SetMetadata(env *events.Envelope, keys map[string]json.RawMessage, created bool)
	// Delete records a thread_deleted tombstone.
	Delete(env *events.Envelope)
	// Anomaly records a finding on env.
	Anomaly(env *events.Envelope, f Finding)
}

// Step folds env into s with the rules: it checks that env is an event of
// s's thread and not malformed ([Admit]), then applies it ([Rules]). The
// caller skips an envelope it applied already (by sequence) first.
func Step(s State, env *events.Envelope) {
	if typ, ok := Admit(s, env); ok {
		Rules(s, env, typ)
	}
}

// Admit records env as seen by s and returns its type, or records an
// anomaly and returns false when it is of another thread or malformed.
// An envelope of another thread is not seen: it says nothing of this one.
func Admit(s State, env *events.Envelope) (events.Type, bool) {
	typ := events.TypeOf(env.Event)
	id := s.ThreadID()
	if env.Thread != id {
		s.Anomaly(env, Finding{Code: CodeOtherThread, Reason: fmt.Sprintf("event of thread %q, not %q", env.Thread, id)})
		return typ, false
	}
	kind := SubjectKind(env, typ)
	s.Seen(env, kind)
	if reason := Malformed(env, typ, id); reason != "" {
		s.Anomaly(env, Finding{Code: CodeMalformed, Reason: reason})
		return typ, false
	}
	return typ, true
}

// Malformed returns why env cannot be applied as an event of thread id, or
// "" when it can. Decode catches most of these; hand-made envelopes may not.
func Malformed(env *events.Envelope, typ events.Type, id string) string {
	switch {
	case env.Err != nil:
		return env.Err.Error()
	case typ == "":
		return fmt.Sprintf("event has no known body (type header %q)", env.Type)
	case env.Event.GetThread() != id:
		return fmt.Sprintf("event names thread %q on a subject of thread %q", env.Event.GetThread(), id)
	case env.Type != "" && env.Type != typ:
		return fmt.Sprintf("type header %q names another body than %s", env.Type, typ)
	case env.Kind != "" && !typ.StoredOn(env.Kind):
		return fmt.Sprintf("%s event on the %s subject", typ, env.Kind)
	}
	return ""
}

// SubjectKind returns the kind of subject env was stored on: its Kind, or
// for a hand-made envelope without one, the kind typ is written to.
func SubjectKind(env *events.Envelope, typ events.Type) events.Kind {
	if env.Kind != "" {
		return env.Kind
	}
	return typ.Kind()
}

// Rules applies env, an admitted event of type typ, to s.
//
//   - An event that contradicts the state is recorded as an anomaly. A
//     consuming event (run_started, answer_given, steering_given) consumes
//     its message whatever else is wrong with it, because a writer handed
//     the message out: the state must never offer it again (I1).
//   - A run_started always starts its run, so the state follows the log
//     (I3). Any other contradicted event changes nothing.
//   - Request ids are a run's own: a later run may reuse one.
func Rules(s State, env *events.Envelope, typ events.Type) {
	ev := env.Event
	switch b := ev.GetBody().(type) {
	case *eventspb.Event_MessagePosted:
		post(s, env, b.MessagePosted)
	case *eventspb.Event_ThreadClaimed:
		holder := b.ThreadClaimed.GetHolder()
		if holder == "" {
			holder = ev.GetHolder()
		}
		s.Claimed(env, holder, b.ThreadClaimed)
	case *eventspb.Event_ThreadReleased:
		release(s, env)
	case *eventspb.Event_RunStarted:
		startRun(s, env, b.RunStarted)
	case *eventspb.Event_RunOutput:
		if runWrite(s, env, b.RunOutput.GetRunId()) {
			s.Output(env, b.RunOutput)
		}
	case *eventspb.Event_RequestOpened:
		openRequest(s, env, b.RequestOpened)
	case *eventspb.Event_AnswerGiven:
		answer(s, env, b.AnswerGiven)
	case *eventspb.Event_SteeringGiven:
		run := b.SteeringGiven.GetRunId()
		ok := activeRun(s, env, run)
		consume(s, env, b.SteeringGiven.GetMessageSeq(), ConsumedSteering, run)
		if ok {
			s.Steered(env, b.SteeringGiven)
		}
	case *eventspb.Event_RunCompleted:
		if runWrite(s, env, b.RunCompleted.GetRunId()) {
			s.EndRun(env, RunCompleted, b.RunCompleted.GetOutput(), "")
		}
	case *eventspb.Event_RunFailed:
		if runWrite(s, env, b.RunFailed.GetRunId()) {
			s.EndRun(env, RunFailed, "", b.RunFailed.GetReason())
		}
	case *eventspb.Event_RunAbandoned:
		abandon(s, env, b.RunAbandoned)
	case *eventspb.Event_ThreadForked:
		forked(s, env, b.ThreadForked)
	case *eventspb.Event_ThreadConfigured:
		st, err := events.ParseStrategy(b.ThreadConfigured.GetStrategy())
		if err != nil || st == "" {
			anomalyf(s, env, CodeUnknownStrategy, "thread_configured with unknown strategy %q; the thread keeps %q", b.ThreadConfigured.GetStrategy(), s.Strategy())
			return
		}
		s.SetStrategy(env, st)
	case *eventspb.Event_CancelRequested:
		cancel(s, env, b.CancelRequested)
	case *eventspb.Event_RunInterrupted:
		interrupt(s, env, b.RunInterrupted)
	case *eventspb.Event_ThreadMetadata:
		var keys map[string]json.RawMessage
		if err := json.Unmarshal([]byte(b.ThreadMetadata.GetMetadataJson()), &keys); err != nil || keys == nil {
			anomalyf(s, env, CodeBadMetadata, "thread_metadata whose metadata is not a JSON object; the thread keeps its metadata")
			return
		}
		s.SetMetadata(env, keys, b.ThreadMetadata.GetCreated())
	case *eventspb.Event_ThreadDeleted:
		s.Delete(env)
	}
}

// post records a message and the strategy it names. The thread's first
// post sets the thread's strategy when it names one and none was set. An
// unknown strategy is an anomaly and counts as none: the post is a message
// anyway.
//
// A message id is the thread's forever: a post whose id the thread has
// already is not a message, whenever it lands (after the store's
// deduplication window, from a poster that died between its id key and its
// post, or forged). It is never pending, never a prompt, and sets nothing.
// The state remembers the ids it was given unresolved; a post the store's
// index resolved (env.FirstPost) needs no memory of its id.
func post(s State, env *events.Envelope, b *eventspb.MessagePosted) {
	if id := b.GetMessageId(); id != "" {
		orig, ok := s.PostedID(id)
		if !ok && env.FirstPost != 0 && env.FirstPost < env.Seq {
			// The store's index found the id's first post, which a bounded
			// state does not remember (events.FirstPosts).
			orig, ok = env.FirstPost, true
		}
		if ok {
			s.Reposted(env, orig)
			if orig == 0 { // a bounded state knows the id, not its message
				anomalyf(s, env, CodeReposted, "message id %q was posted before: a repost at %d is not a new message", id, env.Seq)
				return
			}
			anomalyf(s, env, CodeReposted, "message id %q is message %d's: a repost at %d is not a new message", id, orig, env.Seq)
			return
		}
	}
	if reason := PostFinding(env, s.ThreadID()); reason != "" {
		anomalyf(s, env, CodeBadPost, "%s; it counts as a message anyway", reason)
	}
	first := !s.HasMessages()
	s.Post(env, b)
	st, err := events.ParseStrategy(b.GetStrategy())
	if err != nil {
		anomalyf(s, env, CodeUnknownStrategy, "post names unknown strategy %s; it counts as the thread's", b.GetStrategy())
		return
	}
	if st != "" {
		s.PostStrategy(env, st)
		if first && s.Strategy() == "" {
			s.SetStrategy(env, st)
		}
	}
}

// PostFinding returns why env, a message_posted of thread id, is not a post
// a client writes, or "": a schema this reader does not know, no message id
// or one [events.ValidateMessageID] refuses, a claim_seq or holder (posts
// carry no claim), or an expected-sequence check other than the reject
// strategy's on the thread's run subject. The fold and the audit record it
// as an anomaly; the spec's trace validator (spec/trace.go) calls it too.
func PostFinding(env *events.Envelope, id string) string {
	ev := env.Event
	b := ev.GetMessagePosted()
	switch {
	case env.Schema != "" && env.Schema != events.SchemaVersion:
		return fmt.Sprintf("post with schema %q; this reader knows %s", env.Schema, events.SchemaVersion)
	case b.GetMessageId() == "":
		return "post with no message id"
	case events.ValidateMessageID(b.GetMessageId()) != nil:
		return fmt.Sprintf("post with an invalid message id (%d bytes): %v", len(b.GetMessageId()), events.ValidateMessageID(b.GetMessageId()))
	case ev.GetClaimSeq() != 0 || ev.GetHolder() != "":
		return fmt.Sprintf("post with claim_seq %d and holder %q: posts carry no claim", ev.GetClaimSeq(), ev.GetHolder())
	case (env.ExpectSeq != 0 || env.ExpectSubject != "") && !strings.HasSuffix(env.ExpectSubject, "."+id+"."+string(events.KindRun)):
		return fmt.Sprintf("post with an expected-sequence check (%d on %q) other than the reject strategy's on its run subject", env.ExpectSeq, env.ExpectSubject)
	}
	return ""
}

// cancel marks the run a cancel_requested names (or the active run)
// cancelled when it is active. A request for a run that is not active is a
// race a client may lose (the run ended first), not an anomaly: it changes
// nothing.
func cancel(s State, env *events.Envelope, b *eventspb.CancelRequested) {
	if _, _, ok := s.Active(); !ok || (b.GetRunId() != "" && !s.IsActive(b.GetRunId())) {
		return
	}
	if c, _ := s.ActiveMarks(); c != 0 {
		return
	}
	s.Cancel(env)
}

// interrupt records that a post interrupts the active run.
func interrupt(s State, env *events.Envelope, b *eventspb.RunInterrupted) {
	if !runWrite(s, env, b.GetRunId()) {
		return
	}
	if _, i := s.ActiveMarks(); i != 0 {
		anomalyf(s, env, CodeInterruptedAgain, "run %q was already interrupted at %d", b.GetRunId(), i)
		return
	}
	seq := b.GetMessageSeq()
	switch m := s.MessageOf(seq); {
	case m.Status == MsgNotPosted:
		anomalyf(s, env, CodeNotPosted, "run_interrupted names message %d, which was not posted in this thread", seq)
	default:
		st, ok := s.MessageStrategy(seq)
		if !ok {
			break
		}
		if st == "" {
			st = s.Strategy()
		}
		if st == "" {
			st = events.StrategyEnqueue
		}
		if !st.Interrupts() {
			anomalyf(s, env, CodeNotInterrupting, "run_interrupted names message %d, whose strategy %s does not interrupt", seq, st)
		}
	}
	s.Interrupt(env, b)
}

// forked applies thread_forked: only as the thread's first event (its
// append expects the posted subject empty, and posts come before claims and
// runs), and only with a history that holds together. Else it changes
// nothing.
//
// A fork by reference is applied with the history its reader resolved
// (env.Fork), in the copied form, so both forms fold alike. Unresolved, it
// is applied with no history (the body itself, which copies none, and
// State's Forked sees reference set); a reference to no history (a source
// sequence that is not an event of the source) is a bad body.
func forked(s State, env *events.Envelope, b *eventspb.ThreadForked) {
	if !s.Fresh() {
		anomalyf(s, env, CodeForkNotFirst, "thread_forked at %d is not the thread's first event", env.Seq)
		return
	}
	if reason := ForkBodyError(s.ThreadID(), env.Seq, b); reason != "" {
		anomalyf(s, env, CodeForkBody, "%s", reason)
		return
	}
	if h := env.Fork; b.GetReference() && h != nil {
		if reason := resolvedForkError(s.ThreadID(), env.Seq, b, h); reason != "" {
			anomalyf(s, env, CodeForkBody, "%s", reason)
			return
		}
		b = h.Body
	}
	s.Forked(env, b)
}

// resolvedForkError says why h, the history a reader resolved the fork by
// reference b at seq to, cannot be applied, or returns "".
func resolvedForkError(thread string, seq uint64, b *eventspb.ThreadForked, h *events.ForkHistory) string {
	switch {
	case h.Bad != "":
		return h.Bad
	case h.Body == nil || h.Body.GetReference() ||
		h.Body.GetSourceThread() != b.GetSourceThread() || h.Body.GetSourceSeq() != b.GetSourceSeq():
		return fmt.Sprintf("thread_forked of %s at %d was resolved to another history", b.GetSourceThread(), b.GetSourceSeq())
	}
	return ForkBodyError(thread, seq, h.Body)
}

func anomalyf(s State, env *events.Envelope, code Code, format string, args ...any) {
	s.Anomaly(env, Finding{Code: code, Reason: fmt.Sprintf(format, args...)})
}

// release marks the newest claim released, if the release is that claim's.
func release(s State, env *events.Envelope) {
	cs, holder := env.Event.GetClaimSeq(), env.Event.GetHolder()
	seq, released := s.NewestClaim()
	switch {
	case seq == 0 || cs != seq:
		anomalyf(s, env, CodeReleaseNotNewest, "release of claim %d, but the newest claim is %d", cs, seq)
	case released:
		anomalyf(s, env, CodeReleasedAgain, "claim %d is already released", cs)
	case !s.IsHolder(holder):
		anomalyf(s, env, CodeReleaseHolder, "release of claim %d by %q, but its holder is %q", cs, holder, s.ClaimHolder())
	default:
		s.Released(env)
	}
}

// startRun starts the run even when one is active (I3) or its prompt is
// wrong (I1): the log says it started, and the state follows the log.
func startRun(s State, env *events.Envelope, b *eventspb.RunStarted) {
	if start, _, ok := s.Active(); ok {
		s.Anomaly(env, Finding{Code: CodeOneActiveRun, Run: b.GetRunId(), Reason: fmt.Sprintf(
			"I3: run %q started while run %q, started at %d, is active", b.GetRunId(), s.ActiveID(), start)})
	}
	consume(s, env, b.GetPromptSeq(), ConsumedPrompt, b.GetRunId())
	s.StartRun(env, b)
}

func openRequest(s State, env *events.Envelope, b *eventspb.RequestOpened) {
	if !runWrite(s, env, b.GetRunId()) {
		return
	}
	id := b.GetRequestId()
	if q, dup := s.RequestOf(id); dup {
		anomalyf(s, env, CodeRequestReused, "request %q was already opened at %d by the same run", id, q.Opened)
		return
	}
	s.OpenRequest(env, b)
}

// answer consumes the answer's message in any case (see Rules), and marks
// the request answered only when it is an open request of the active run.
func answer(s State, env *events.Envelope, b *eventspb.AnswerGiven) {
	id, run := b.GetRequestId(), b.GetRunId()
	ok := false
	if activeRun(s, env, run) {
		switch q, known := s.RequestOf(id); {
		case !known:
			anomalyf(s, env, CodeUnknownRequest, "answer to unknown request %q: the active run did not open it", id)
		case q.Answered:
			s.Anomaly(env, Finding{Code: CodeAnsweredAgain, Run: run, Reason: fmt.Sprintf(
				"request %q was already answered at %d", id, q.AnswerAt)})
		default:
			ok = true
		}
	}
	consume(s, env, b.GetMessageSeq(), ConsumedAnswer, run)
	if ok {
		s.Answered(env, b)
	}
}

func abandon(s State, env *events.Envelope, b *eventspb.RunAbandoned) {
	run := b.GetRunId()
	if _, _, active := s.Active(); !active {
		if id, st, _, ok := s.LastRun(); ok && id == run && (st == RunCompleted || st == RunFailed) {
			// The run's own holder recorded its end first: the new claimant
			// planned the abandon before the end reached it. Nothing to undo.
			return
		}
	}
	if !activeRun(s, env, run) {
		return
	}
	newest, _ := s.NewestClaim()
	switch _, claim, _ := s.Active(); {
	case b.GetStartedClaimSeq() != claim:
		anomalyf(s, env, CodeAbandonClaim, "run %q started under claim %d, not %d as its abandon says", run, claim, b.GetStartedClaimSeq())
	case claim >= newest:
		// Only an older claim's run is abandoned. The run still ends: the
		// honest holder so ends a run_started under its claim that it did
		// not write.
		anomalyf(s, env, CodeAbandonOwn, "run %q started under claim %d, the newest: only an older claim's run is abandoned", run, claim)
	}
	s.EndRun(env, RunAbandoned, "", b.GetReason())
}

// consume marks message seq consumed by env. It records an anomaly when the
// message was not posted, was consumed already (I1; the first consumption
// stands), or is not the oldest pending message.
func consume(s State, env *events.Envelope, seq uint64, kind ConsumptionKind, run string) {
	m := s.MessageOf(seq)
	switch m.Status {
	case MsgNotPosted:
		s.Anomaly(env, Finding{Code: CodeNotPosted, Msg: seq, Run: run, Reason: fmt.Sprintf(
			"%s names message %d, which was not posted in this thread", kind, seq)})
		return
	case MsgConsumed:
		s.Anomaly(env, Finding{Code: CodeConsumedAgain, Msg: seq, Run: run, Reason: fmt.Sprintf(
			"I1: message %d was already consumed at %d", seq, m.By)})
		return
	case MsgTaken:
		s.Anomaly(env, Finding{Code: CodeTaken, Msg: seq, Run: run, Reason: fmt.Sprintf(
			"message %d is at or before the taken cursor", seq)})
		return
	case MsgReposted:
		repostConsumed(s, env, seq, m.By, kind, run)
		return
	}
	if !m.Oldest {
		s.Anomaly(env, Finding{Code: CodeNotOldest, Msg: seq, Run: run, Reason: fmt.Sprintf(
			"message %d is not the oldest pending message", seq)})
	}
	s.Consume(env, seq, kind, run)
}

// runWrite reports whether env, an unfenced event of run (its output, a
// request, an interrupt or its end), may change the state: run is the
// active run, and env was written under the claim the run started under,
// by the holder that started it. Only that holder writes a run's events
// (the run subject's compare-and-set orders them, it does not say who
// wrote them), so any other writer's is an anomaly that changes nothing.
func runWrite(s State, env *events.Envelope, run string) bool {
	if !activeRun(s, env, run) {
		return false
	}
	ev := env.Event
	if _, claim, _ := s.Active(); ev.GetClaimSeq() != claim || !s.IsRunHolder(ev.GetHolder()) {
		s.Anomaly(env, Finding{Code: CodeRunHolder, Run: run, Reason: fmt.Sprintf(
			"%s of run %q names claim %d and holder %q, but the run started under claim %d held by %q",
			events.TypeOf(ev), run, ev.GetClaimSeq(), ev.GetHolder(), claim, s.RunHolder())})
		return false
	}
	return true
}

// repostConsumed records a consuming event that names seq, a repost of
// message orig's id. Consuming it hands the id out again: an I1 violation
// when orig was consumed, else an anomaly (orig stays pending: it is the
// message).
func repostConsumed(s State, env *events.Envelope, seq, orig uint64, kind ConsumptionKind, run string) {
	switch o := s.MessageOf(orig); o.Status {
	case MsgConsumed, MsgTaken:
		s.Anomaly(env, Finding{Code: CodeIDConsumedAgain, Msg: orig, Run: run, Reason: fmt.Sprintf(
			"I1: %s names message %d, a repost of message %d's id, which was consumed already", kind, seq, orig)})
	default:
		s.Anomaly(env, Finding{Code: CodeRepostConsumed, Msg: seq, Run: run, Reason: fmt.Sprintf(
			"%s names message %d, a repost of message %d's id: not a message", kind, seq, orig)})
	}
}

// activeRun reports whether run is the active run, recording an anomaly
// when it is not.
func activeRun(s State, env *events.Envelope, run string) bool {
	if s.IsActive(run) {
		return true
	}
	f := Finding{Code: CodeNotActive, Run: run}
	switch id, st, end, ok := s.LastRun(); {
	case ok && id == run && st != RunActive:
		f.Reason = fmt.Sprintf("run %q is not active: it was %s at %d", run, st, end)
	default:
		if _, _, active := s.Active(); active {
			f.Reason = fmt.Sprintf("run %q is not the active run %q", run, s.ActiveID())
		} else {
			f.Reason = fmt.Sprintf("run %q is not active: no run is", run)
		}
	}
	s.Anomaly(env, f)
	return false
}
