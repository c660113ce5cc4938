// Package eventgen builds event logs for tests and benchmarks: of the
// folds (projections, projections/audit, projections/summaries), and of
// the audit on a real stream (`artifactr bench audit`). Every envelope goes
// through the codec (events.Encode, then events.Decode), so garbage
// payloads and header mismatches reach the folds exactly as a store would
// hand them over.
//
// # Usage
//
//	l := eventgen.NewLog()
//	w := eventgen.Writer{Thread: "T", Holder: "h1"}
//	m := l.Post(w.Post("m1", "hello"))
//	w.ClaimSeq = l.CAS(w.Claimed(1)).Seq
//	l.Fenced(w.Started("r1", m.Seq))
//	th := projections.Fold("T", l.Envs)
//
// [Random] simulates well-behaved writers, with optional faults, and
// [FromBytes] turns fuzz input into a log. [Realistic] streams a long clean
// log of realistic turns and sizes, to publish, without keeping it; it and
// [Log] stamp events with the same [Seqs].
package eventgen

import (
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// Base is the Stored time of sequence 0; sequence n is stored n ms later.
var Base = time.Date(2026, 10, 16, 12, 0, 0, 0, time.UTC)

// Log is a stream being built: it assigns sequences and remembers the last
// sequence on each subject, as JetStream does for its expected-sequence checks.
type Log struct {
	Subjects events.Subjects
	Envs     []events.Envelope
	Msgs     []Msg // the stored messages Envs were decoded from, for read benchmarks

	seq  uint64
	last map[string]uint64 // subject -> last sequence on it
}

// Seqs assigns stream sequences as JetStream does to one publisher's
// messages, in order, and stamps events with the headers a store's append
// gives them.
type Seqs struct {
	Subjects events.Subjects
	Seq      uint64 // the last sequence assigned
}

// Next encodes ev with the headers of chk, and msgID as its Nats-Msg-Id
// when not "", at the next sequence, and returns the stored message:
// CheckSubject sets the expected sequence, CheckFence also names the
// thread's claim subject. An event with no time gets its sequence's
// [Stored] time. It panics when ev does not encode: the generators' own
// events always do; forge invalid ones with [Log.Raw] and [Marshal].
func (q *Seqs) Next(ev *eventspb.Event, chk events.Check, msgID string) Msg {
	q.Seq++
	if ev.Time == nil {
		ev.Time = timestamppb.New(Stored(q.Seq))
	}
	data, h, err := events.Encode(ev)
	if err != nil {
		panic(fmt.Sprintf("eventgen: %v", err))
	}
	if msgID != "" {
		h[events.HeaderMsgID] = []string{msgID}
	}
	switch chk.Mode {
	case events.CheckSubject:
		h[events.HeaderExpectSeq] = []string{strconv.FormatUint(chk.Seq, 10)}
	case events.CheckFence:
		h[events.HeaderExpectSeq] = []string{strconv.FormatUint(chk.Seq, 10)}
		h[events.HeaderExpectSubj] = []string{q.Subjects.Thread(ev.GetThread(), events.KindClaim)}
	}
	subject := q.Subjects.Thread(ev.GetThread(), events.TypeOf(ev).Kind())
	return Msg{Subject: subject, Seq: q.Seq, Header: h, Data: data}
}

// Msg is a stored message: what a store reads back before events.Decode.
type Msg struct {
	Subject string
	Seq     uint64
	Header  events.Header
	Data    []byte
}

// NewLog returns an empty log on the default subject prefix.
func NewLog() *Log { return &Log{last: make(map[string]uint64)} }

// Seq returns the last sequence assigned.
func (l *Log) Seq() uint64 { return l.seq }

// LastOn returns the last sequence on subject, 0 when it has none.
func (l *Log) LastOn(subject string) uint64 { return l.last[subject] }

// Stored returns the stored time of sequence seq.
func Stored(seq uint64) time.Time { return Base.Add(time.Duration(seq) * time.Millisecond) }

// Raw stores data with headers h on subject at the next sequence and returns
// the envelope events.Decode makes of it.
func (l *Log) Raw(subject string, h events.Header, data []byte) events.Envelope {
	l.seq++
	env := events.Decode(l.Subjects, subject, l.seq, Stored(l.seq), h, data)
	l.Msgs = append(l.Msgs, Msg{Subject: subject, Seq: l.seq, Header: h, Data: data})
	if l.last == nil {
		l.last = make(map[string]uint64)
	}
	l.last[subject] = l.seq
	l.Envs = append(l.Envs, env)
	return env
}

// Event encodes ev and stores it on its type's subject with the headers of
// chk, as a store's append would: CheckSubject sets the expected sequence,
// CheckFence also names the thread's claim subject. It panics when ev does not
// encode; forge invalid events with [Log.Raw] and [Marshal].
func (l *Log) Event(ev *eventspb.Event, chk events.Check) events.Envelope {
	q := Seqs{Subjects: l.Subjects, Seq: l.seq}
	m := q.Next(ev, chk, "")
	return l.Raw(m.Subject, m.Header, m.Data)
}

// SubjectOf returns the subject of ev's type in ev's thread.
func (l *Log) SubjectOf(ev *eventspb.Event) string {
	return l.Subjects.Thread(ev.GetThread(), events.TypeOf(ev).Kind())
}

// Post stores a message_posted with no check.
func (l *Log) Post(ev *eventspb.Event) events.Envelope {
	return l.Event(ev, events.Check{})
}

// CAS stores ev expecting the last sequence of its own subject: a correct
// compare-and-set, as claims, releases and unfenced run events make.
func (l *Log) CAS(ev *eventspb.Event) events.Envelope {
	return l.Event(ev, events.ExpectLast(l.LastOn(l.SubjectOf(ev))))
}

// Fenced stores ev with the fence of its own claim_seq.
func (l *Log) Fenced(ev *eventspb.Event) events.Envelope {
	return l.Event(ev, events.Check{Mode: events.CheckFence, Seq: ev.GetClaimSeq()})
}

// Repeat appends envs[i] again, unchanged: a redelivery.
func (l *Log) Repeat(i int) events.Envelope {
	env := l.Envs[i]
	l.Envs = append(l.Envs, env)
	return env
}

// Marshal encodes ev without validating it, for forged events.
func Marshal(ev *eventspb.Event) []byte {
	data, err := proto.Marshal(ev)
	if err != nil {
		panic(fmt.Sprintf("eventgen: %v", err))
	}
	return data
}

// Header returns headers naming type t, as events.Encode makes them.
func Header(t events.Type) events.Header {
	return events.Header{events.HeaderType: {string(t)}, events.HeaderSchema: {events.SchemaVersion}}
}

// Writer makes the events of one writer of a thread: a person posting, or a
// claim holder. Set ClaimSeq after its thread_claimed lands.
type Writer struct {
	Thread   string
	Holder   string
	ClaimSeq uint64
}

func (w Writer) event() *eventspb.Event {
	return &eventspb.Event{Thread: w.Thread, ClaimSeq: w.ClaimSeq, Holder: w.Holder}
}

// Post returns a message_posted.
func (w Writer) Post(id, text string) *eventspb.Event {
	return &eventspb.Event{Thread: w.Thread, Body: &eventspb.Event_MessagePosted{
		MessagePosted: &eventspb.MessagePosted{MessageId: id, Author: "person", Text: text}}}
}

// Claimed returns a thread_claimed marker; like events.AcquireClaim it
// carries no claim_seq.
func (w Writer) Claimed(rev uint64) *eventspb.Event {
	return &eventspb.Event{Thread: w.Thread, Holder: w.Holder, Body: &eventspb.Event_ThreadClaimed{
		ThreadClaimed: &eventspb.ThreadClaimed{Holder: w.Holder, LeaseRevision: rev, LeaseTtlMs: 30000}}}
}

// Released returns a thread_released of the writer's claim.
func (w Writer) Released() *eventspb.Event {
	ev := w.event()
	ev.Body = &eventspb.Event_ThreadReleased{ThreadReleased: &eventspb.ThreadReleased{Holder: w.Holder, Reason: "idle"}}
	return ev
}

// Started returns a run_started consuming prompt.
func (w Writer) Started(run string, prompt uint64) *eventspb.Event {
	ev := w.event()
	ev.Body = &eventspb.Event_RunStarted{RunStarted: &eventspb.RunStarted{RunId: run, PromptSeq: prompt, Agent: "echo"}}
	return ev
}

// Output returns a run_output.
func (w Writer) Output(run, text string) *eventspb.Event {
	ev := w.event()
	ev.Body = &eventspb.Event_RunOutput{RunOutput: &eventspb.RunOutput{RunId: run, Text: text}}
	return ev
}

// Opened returns a request_opened.
func (w Writer) Opened(run, req string) *eventspb.Event {
	ev := w.event()
	ev.Body = &eventspb.Event_RequestOpened{RequestOpened: &eventspb.RequestOpened{RunId: run, RequestId: req, Question: "which?"}}
	return ev
}

// Answer returns an answer_given consuming msg.
func (w Writer) Answer(run, req string, msg uint64) *eventspb.Event {
	ev := w.event()
	ev.Body = &eventspb.Event_AnswerGiven{AnswerGiven: &eventspb.AnswerGiven{RunId: run, RequestId: req, MessageSeq: msg}}
	return ev
}

// Steer returns a steering_given consuming msg.
func (w Writer) Steer(run string, msg uint64) *eventspb.Event {
	ev := w.event()
	ev.Body = &eventspb.Event_SteeringGiven{SteeringGiven: &eventspb.SteeringGiven{RunId: run, MessageSeq: msg}}
	return ev
}

// Completed returns a run_completed.
func (w Writer) Completed(run string) *eventspb.Event {
	ev := w.event()
	ev.Body = &eventspb.Event_RunCompleted{RunCompleted: &eventspb.RunCompleted{RunId: run, Output: "done"}}
	return ev
}

// Failed returns a run_failed.
func (w Writer) Failed(run string) *eventspb.Event {
	ev := w.event()
	ev.Body = &eventspb.Event_RunFailed{RunFailed: &eventspb.RunFailed{RunId: run, Reason: "agent error"}}
	return ev
}

// Abandoned returns a run_abandoned of a run started under startedClaim.
func (w Writer) Abandoned(run string, startedClaim uint64) *eventspb.Event {
	ev := w.event()
	ev.Body = &eventspb.Event_RunAbandoned{RunAbandoned: &eventspb.RunAbandoned{RunId: run, StartedClaimSeq: startedClaim, Reason: "takeover"}}
	return ev
}
