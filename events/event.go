package events

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/events/eventspb"
)

// SchemaVersion is the version of the event schema in eventspb, carried in
// the HeaderSchema header.
const SchemaVersion = "1"

// Headers carried by every event. The Nats- ones are JetStream's own.
const (
	HeaderType       = "Artifactr-Type"
	HeaderSchema     = "Artifactr-Schema"
	HeaderMsgID      = "Nats-Msg-Id"
	HeaderExpectSeq  = "Nats-Expected-Last-Subject-Sequence"
	HeaderExpectSubj = "Nats-Expected-Last-Subject-Sequence-Subject"
)

// Type names an event body. It is the value of the HeaderType header.
type Type string

// The event types.
const (
	TypeMessagePosted  Type = "message_posted"
	TypeThreadClaimed  Type = "thread_claimed"
	TypeThreadReleased Type = "thread_released"
	TypeRunStarted     Type = "run_started"
	TypeRunOutput      Type = "run_output"
	TypeRequestOpened  Type = "request_opened"
	TypeAnswerGiven    Type = "answer_given"
	TypeSteeringGiven  Type = "steering_given"
	TypeRunCompleted   Type = "run_completed"
	TypeRunFailed      Type = "run_failed"
	TypeRunAbandoned   Type = "run_abandoned"
	TypeThreadForked   Type = "thread_forked"

	TypeThreadConfigured Type = "thread_configured"
	TypeCancelRequested  Type = "cancel_requested"
	TypeRunInterrupted   Type = "run_interrupted"

	TypeThreadMetadata Type = "thread_metadata"
	TypeThreadDeleted  Type = "thread_deleted"
)

// TypeOf returns the type of ev's body, or "" when it has none.
func TypeOf(ev *eventspb.Event) Type {
	switch ev.GetBody().(type) {
	case *eventspb.Event_MessagePosted:
		return TypeMessagePosted
	case *eventspb.Event_ThreadClaimed:
		return TypeThreadClaimed
	case *eventspb.Event_ThreadReleased:
		return TypeThreadReleased
	case *eventspb.Event_RunStarted:
		return TypeRunStarted
	case *eventspb.Event_RunOutput:
		return TypeRunOutput
	case *eventspb.Event_RequestOpened:
		return TypeRequestOpened
	case *eventspb.Event_AnswerGiven:
		return TypeAnswerGiven
	case *eventspb.Event_SteeringGiven:
		return TypeSteeringGiven
	case *eventspb.Event_RunCompleted:
		return TypeRunCompleted
	case *eventspb.Event_RunFailed:
		return TypeRunFailed
	case *eventspb.Event_RunAbandoned:
		return TypeRunAbandoned
	case *eventspb.Event_ThreadForked:
		return TypeThreadForked
	case *eventspb.Event_ThreadConfigured:
		return TypeThreadConfigured
	case *eventspb.Event_CancelRequested:
		return TypeCancelRequested
	case *eventspb.Event_RunInterrupted:
		return TypeRunInterrupted
	case *eventspb.Event_ThreadMetadata:
		return TypeThreadMetadata
	case *eventspb.Event_ThreadDeleted:
		return TypeThreadDeleted
	}
	return ""
}

// Kind returns the subject the type is written to, or "" for an unknown type.
func (t Type) Kind() Kind {
	switch t {
	case TypeMessagePosted, TypeThreadForked, TypeThreadConfigured, TypeCancelRequested,
		TypeThreadMetadata, TypeThreadDeleted:
		return KindPosted
	case TypeThreadClaimed, TypeThreadReleased:
		return KindClaim
	case TypeRunStarted, TypeRunOutput, TypeRequestOpened, TypeAnswerGiven,
		TypeSteeringGiven, TypeRunCompleted, TypeRunFailed, TypeRunAbandoned,
		TypeRunInterrupted:
		return KindRun
	}
	return ""
}

// StoredOn reports whether an event of type t is well placed on a subject
// of kind k: its own kind, or, for a claim marker or release, the run
// subject too, where the RUNFENCE layout stores them ([Subjects.RunFence]).
// Readers accept a marker on either, so one reader serves both layouts.
func (t Type) StoredOn(k Kind) bool {
	return t.Kind() == k || t.Kind() == KindClaim && k == KindRun
}

// Marker reports whether t is a claim marker or a release: the events that
// say who holds a thread.
func (t Type) Marker() bool { return t == TypeThreadClaimed || t == TypeThreadReleased }

// Fenced reports whether the type consumes a message or ends another claim's
// run, and so may only be appended with [Fenced] (DESIGN §3).
func (t Type) Fenced() bool {
	switch t {
	case TypeRunStarted, TypeAnswerGiven, TypeSteeringGiven, TypeRunAbandoned:
		return true
	}
	return false
}

// Envelope is one event as stored: its position, its headers and its decoded
// body. Err is set, and Event may be nil, when the stored bytes are not a
// valid event; such an envelope is an anomaly, never a panic.
type Envelope struct {
	Seq     uint64    // stream sequence
	Subject string    // full subject
	Thread  string    // thread id from the subject
	Kind    Kind      // subject kind from the subject
	Type    Type      // HeaderType as stored
	MsgID   string    // Nats-Msg-Id as stored
	Stored  time.Time // the server's timestamp

	// ExpectSeq and ExpectSubject are the expected-sequence check the append
	// carried, as stored with the message. Zero and "" when none.
	ExpectSeq     uint64
	ExpectSubject string

	// TraceParent is the W3C traceparent a post carried, "" when none.
	TraceParent string
	// Schema is the HeaderSchema as stored, "" when none.
	Schema string

	Event *eventspb.Event
	Err   error

	// GuardBefore says that the message stored right before this event,
	// at Seq-1, is the guard of this guarded consuming append (see
	// [KindGuard]), which the store skipped: a reader that follows the
	// whole stream and last saw Seq-2 missed nothing. Set by the stores'
	// tails and durable consumers when they skipped that guard.
	GuardBefore bool

	// Fork is what a reader resolved a thread_forked by reference to
	// (projections.ResolveFork): the history it names. nil when the event
	// is no such fork or was not resolved. It is no part of the stored
	// message, and no store sets it.
	Fork *ForkHistory

	// FirstPost is, for a message_posted with a message id, the sequence of
	// the thread's first post of that id as the store's index resolved it
	// ([FirstPosts]): Seq itself for the first, an earlier one for a
	// repost. 0 when not resolved, or when the index could not say. It is
	// no part of the stored message, and no store sets it on a read.
	FirstPost uint64
}

// ForkHistory is the history a thread_forked by reference names, read from
// its source's log up to its source sequence.
type ForkHistory struct {
	// Body is the history in the copied form of thread_forked (messages
	// and runs, reference unset); nil when Bad is set.
	Body *eventspb.ThreadForked
	// Bad says why the reference names no history, such as a source
	// sequence that is not an event of the source; "" when Body is set.
	Bad string
}

// Header is a message's headers, as nats.Header.
type Header map[string][]string

// Get returns the first value of key, or "".
func (h Header) Get(key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Encode marshals ev for the subject of its type, returning its payload and
// the headers that name it. It validates ev first.
func Encode(ev *eventspb.Event) ([]byte, Header, error) {
	data, err := Marshal(ev)
	if err != nil {
		return nil, nil, err
	}
	h := Header{HeaderType: {string(TypeOf(ev))}, HeaderSchema: {SchemaVersion}}
	return data, h, nil
}

// Marshal is [Encode] without the headers, for a store that sets them
// itself: HeaderType, the value of [TypeOf], and HeaderSchema,
// [SchemaVersion].
func Marshal(ev *eventspb.Event) ([]byte, error) {
	if err := Validate(ev); err != nil {
		return nil, err
	}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	return data, nil
}

// Validate checks that ev has a body and a valid thread id.
func Validate(ev *eventspb.Event) error {
	if ev == nil || TypeOf(ev) == "" {
		return fmt.Errorf("%w: no body", ErrInvalidEvent)
	}
	return ValidateThreadID(ev.GetThread())
}

// Decode builds an envelope from a stored message. It never fails: a payload
// that does not decode, or that contradicts its subject or headers, is
// returned with Err set.
func Decode(subjects Subjects, subject string, seq uint64, stored time.Time, h Header, data []byte) Envelope {
	env := Envelope{
		Seq:           seq,
		Subject:       subject,
		Stored:        stored,
		Type:          Type(h.Get(HeaderType)),
		MsgID:         h.Get(HeaderMsgID),
		ExpectSubject: h.Get(HeaderExpectSubj),
		TraceParent:   h.Get(HeaderTraceParent),
		Schema:        h.Get(HeaderSchema),
	}
	if v := h.Get(HeaderExpectSeq); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			env.Err = fmt.Errorf("bad %s header %q", HeaderExpectSeq, v)
		}
		env.ExpectSeq = n
	}
	thread, kind, ok := subjects.Parse(subject)
	env.Thread, env.Kind = thread, kind
	if !ok {
		form := subjects.prefix() + ".<thread>.<posted|claim|run>"
		if subjects.Partitioned() {
			form = subjects.prefix() + ".<the thread's partition>.<thread>.<posted|claim|run>"
		}
		env.Err = errors.Join(env.Err, fmt.Errorf("subject %q is not %s", subject, form))
		return env
	}
	ev := new(eventspb.Event)
	if err := proto.Unmarshal(data, ev); err != nil {
		env.Err = errors.Join(env.Err, fmt.Errorf("undecodable payload (%d bytes): %v", len(data), err))
		return env
	}
	t := TypeOf(ev)
	switch {
	case t == "":
		env.Err = errors.Join(env.Err, fmt.Errorf("event has no known body (type header %q)", env.Type))
	case ev.GetThread() != thread:
		env.Err = errors.Join(env.Err, fmt.Errorf("event thread %q on subject of thread %q", ev.GetThread(), thread))
	case !t.StoredOn(kind):
		env.Err = errors.Join(env.Err, fmt.Errorf("%s event on the %s subject", t, kind))
	case env.Type != t:
		env.Err = errors.Join(env.Err, fmt.Errorf("%s header %q names another body than %s", HeaderType, env.Type, t))
	}
	env.Event = ev
	if env.Type == "" {
		env.Type = t
	}
	return env
}
