package natsstore

import (
	"cmp"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// decode builds the envelope of a stored message, as events.Decode does, with
// a fast path for the common case: a well-formed event that agrees with its
// subject and headers. The fast path reads the protobuf wire format by hand
// (a fraction of proto.Unmarshal's time, and two allocations instead of
// eight: one for the event and its time, one for its body) and builds the
// envelope only when events.Decode would build the same one without an
// error. Anything else (an unknown or repeated field, invalid UTF-8, a body
// that contradicts the subject or a header) goes to events.Decode, which
// owns every error message. The tests check the two against each other on
// random and fuzzed input.
//
// The event's strings share the payload's memory instead of copying it:
// data must not change after decode. Every payload decode sees is its own:
// the nats client gives each delivered message a buffer of its own, and
// STREAM.MSG.GET replies are unmarshalled into new slices; natsstore never
// writes to one. Holding any string of an event holds its payload (a few
// hundred bytes).
func (s *Store) decode(subject string, seq uint64, stored time.Time, h events.Header, data []byte) events.Envelope {
	if env, ok := s.decodeFast(subject, seq, stored, h, data); ok {
		return env
	}
	return events.Decode(s.subj, subject, seq, stored, h, data)
}

func (s *Store) decodeFast(subject string, seq uint64, stored time.Time, h events.Header, data []byte) (events.Envelope, bool) {
	var expect uint64
	if v := h.Get(events.HeaderExpectSeq); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return events.Envelope{}, false
		}
		expect = n
	}
	ev, ok := unmarshalEvent(data)
	if !ok {
		return events.Envelope{}, false
	}
	thread := ev.GetThread()
	kind, ok := s.kindOf(subject, thread)
	t := events.TypeOf(ev)
	if !ok || !t.StoredOn(kind) || events.Type(h.Get(events.HeaderType)) != t {
		return events.Envelope{}, false
	}
	return events.Envelope{
		Seq:           seq,
		Subject:       subject,
		Thread:        thread,
		Kind:          kind,
		Type:          t,
		MsgID:         h.Get(events.HeaderMsgID),
		Stored:        stored,
		ExpectSeq:     expect,
		ExpectSubject: h.Get(events.HeaderExpectSubj),
		TraceParent:   h.Get(events.HeaderTraceParent),
		Schema:        h.Get(events.HeaderSchema),
		Event:         ev,
	}, true
}

// kindOf returns the kind of subject if it is <prefix>.<thread>.<kind>
// (<prefix>.<p>.<thread>.<kind> with partitions, p the thread's) with a
// valid thread: what Subjects.Parse would return, checked against the
// thread the event names.
func (s *Store) kindOf(subject, thread string) (events.Kind, bool) {
	p := cmp.Or(s.subj.Prefix, events.DefaultPrefix)
	if s.subj.Partitioned() {
		p += "." + strconv.Itoa(s.subj.PartitionOf(thread))
	}
	n, m := len(p), len(thread)
	if len(subject) < n+m+3 || subject[:n] != p || subject[n] != '.' ||
		subject[n+1:n+1+m] != thread || subject[n+1+m] != '.' || events.ValidateThreadID(thread) != nil {
		return "", false
	}
	switch k := events.Kind(subject[n+m+2:]); k {
	case events.KindPosted, events.KindClaim, events.KindRun:
		return k, true
	}
	return "", false
}

// head is an event's fields besides its body, read before the event is
// allocated.
type head struct {
	thread, holder string
	claimSeq       uint64
	hasTime        bool
	seconds        int64
	nanos          int32
}

// fill sets ev's fields besides its body, and its time in ts.
func (h *head) fill(ev *eventspb.Event, ts *timestamppb.Timestamp) {
	ev.Thread, ev.Holder, ev.ClaimSeq = h.thread, h.holder, h.claimSeq
	if h.hasTime {
		ts.Seconds, ts.Nanos = h.seconds, h.nanos
		ev.Time = ts
	}
}

// unmarshalEvent reads data as eventspb.Event, as proto.Unmarshal would, if
// every field is one of the schema's, of its wire type, present at most
// once, with valid UTF-8 strings, and with exactly one body. It reports
// false otherwise, leaving the case to proto.Unmarshal.
func unmarshalEvent(data []byte) (*eventspb.Event, bool) {
	str := unsafe.String(unsafe.SliceData(data), len(data)) // data is never written to; see decode
	var h head
	var body flat
	var bodyNum protowire.Number
	var seen uint64 // field numbers 1..maxField
	ok := false
	for off := 0; off < len(data); {
		num, typ, n := protowire.ConsumeTag(data[off:])
		if n < 0 || num < 1 || num > maxField || seen&(1<<num) != 0 {
			return nil, false
		}
		seen |= 1 << num
		off += n
		if num == 3 { // claim_seq
			if typ != protowire.VarintType {
				return nil, false
			}
			v, n := protowire.ConsumeVarint(data[off:])
			if n < 0 {
				return nil, false
			}
			h.claimSeq, off = v, off+n
			continue
		}
		if typ != protowire.BytesType {
			return nil, false
		}
		v, n := protowire.ConsumeBytes(data[off:])
		if n < 0 {
			return nil, false
		}
		start, end := off+n-len(v), off+n
		off = end
		switch {
		case num == 1:
			if h.thread, ok = utf8String(str, start, end); !ok {
				return nil, false
			}
		case num == 2:
			if h.seconds, h.nanos, ok = unmarshalTime(v); !ok {
				return nil, false
			}
			h.hasTime = true
		case num == 4:
			if h.holder, ok = utf8String(str, start, end); !ok {
				return nil, false
			}
		case bodies[num].build != nil:
			if bodyNum != 0 {
				return nil, false // a second body: proto keeps the last
			}
			if body, ok = parseFlat(v, str, start, bodies[num].kinds); !ok {
				return nil, false
			}
			bodyNum = num
		default:
			return nil, false
		}
	}
	if bodyNum == 0 {
		return nil, false
	}
	return bodies[bodyNum].build(h, body), true
}

func utf8String(str string, start, end int) (string, bool) {
	s := str[start:end]
	return s, utf8.ValidString(s)
}

func unmarshalTime(b []byte) (seconds int64, nanos int32, ok bool) {
	var seen uint8
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 || typ != protowire.VarintType || (num != 1 && num != 2) || seen&(1<<num) != 0 {
			return 0, 0, false
		}
		seen |= 1 << num
		off += n
		v, n := protowire.ConsumeVarint(b[off:])
		if n < 0 {
			return 0, 0, false
		}
		off += n
		if num == 1 {
			seconds = int64(v)
		} else {
			nanos = int32(v)
		}
	}
	return seconds, nanos, true
}

// flat is a body message: up to three fields, each a string or a varint.
type flat struct {
	s [3]string
	u [3]uint64
}

// Field kinds of a flat message, by field number - 1.
const (
	fNone byte = iota
	fString
	fVarint // uint64 or int64, not sint64
)

// maxField is the largest Event field number the fast path reads.
const maxField = 63

// bodySpec is how the fast path reads one body: its fields' kinds, and how
// to build the event from them.
type bodySpec struct {
	kinds [3]byte
	build func(h head, f flat) *eventspb.Event // by value: a pointer passed to a func value escapes
}

// bodies are the bodies the fast path reads, by Event field number: a copy
// of events.proto, which TestBodies_matchDescriptor checks against the
// compiled descriptor. A body missing here goes to events.Decode. To add a
// body: one line with its fields' kinds and a setter of its fields and its
// oneof wrapper.
var bodies = [maxField + 1]bodySpec{
	10: body(fString, fString, fString, func(x *withBody[eventspb.Event_MessagePosted, eventspb.MessagePosted], f flat) {
		x.m.MessageId, x.m.Author, x.m.Text = f.s[0], f.s[1], f.s[2]
		x.w.MessagePosted, x.ev.Body = &x.m, &x.w
	}),
	11: body(fString, fVarint, fVarint, func(x *withBody[eventspb.Event_ThreadClaimed, eventspb.ThreadClaimed], f flat) {
		x.m.Holder, x.m.LeaseRevision, x.m.LeaseTtlMs = f.s[0], f.u[1], int64(f.u[2])
		x.w.ThreadClaimed, x.ev.Body = &x.m, &x.w
	}),
	12: body(fString, fString, fNone, func(x *withBody[eventspb.Event_ThreadReleased, eventspb.ThreadReleased], f flat) {
		x.m.Holder, x.m.Reason = f.s[0], f.s[1]
		x.w.ThreadReleased, x.ev.Body = &x.m, &x.w
	}),
	13: body(fString, fVarint, fString, func(x *withBody[eventspb.Event_RunStarted, eventspb.RunStarted], f flat) {
		x.m.RunId, x.m.PromptSeq, x.m.Agent = f.s[0], f.u[1], f.s[2]
		x.w.RunStarted, x.ev.Body = &x.m, &x.w
	}),
	14: body(fString, fString, fNone, func(x *withBody[eventspb.Event_RunOutput, eventspb.RunOutput], f flat) {
		x.m.RunId, x.m.Text = f.s[0], f.s[1]
		x.w.RunOutput, x.ev.Body = &x.m, &x.w
	}),
	15: body(fString, fString, fString, func(x *withBody[eventspb.Event_RequestOpened, eventspb.RequestOpened], f flat) {
		x.m.RunId, x.m.RequestId, x.m.Question = f.s[0], f.s[1], f.s[2]
		x.w.RequestOpened, x.ev.Body = &x.m, &x.w
	}),
	16: body(fString, fString, fVarint, func(x *withBody[eventspb.Event_AnswerGiven, eventspb.AnswerGiven], f flat) {
		x.m.RunId, x.m.RequestId, x.m.MessageSeq = f.s[0], f.s[1], f.u[2]
		x.w.AnswerGiven, x.ev.Body = &x.m, &x.w
	}),
	17: body(fString, fVarint, fNone, func(x *withBody[eventspb.Event_SteeringGiven, eventspb.SteeringGiven], f flat) {
		x.m.RunId, x.m.MessageSeq = f.s[0], f.u[1]
		x.w.SteeringGiven, x.ev.Body = &x.m, &x.w
	}),
	18: body(fString, fString, fNone, func(x *withBody[eventspb.Event_RunCompleted, eventspb.RunCompleted], f flat) {
		x.m.RunId, x.m.Output = f.s[0], f.s[1]
		x.w.RunCompleted, x.ev.Body = &x.m, &x.w
	}),
	19: body(fString, fString, fNone, func(x *withBody[eventspb.Event_RunFailed, eventspb.RunFailed], f flat) {
		x.m.RunId, x.m.Reason = f.s[0], f.s[1]
		x.w.RunFailed, x.ev.Body = &x.m, &x.w
	}),
	20: body(fString, fVarint, fString, func(x *withBody[eventspb.Event_RunAbandoned, eventspb.RunAbandoned], f flat) {
		x.m.RunId, x.m.StartedClaimSeq, x.m.Reason = f.s[0], f.u[1], f.s[2]
		x.w.RunAbandoned, x.ev.Body = &x.m, &x.w
	}),
	40: body(fString, fNone, fNone, func(x *withBody[eventspb.Event_ThreadConfigured, eventspb.ThreadConfigured], f flat) {
		x.m.Strategy = f.s[0]
		x.w.ThreadConfigured, x.ev.Body = &x.m, &x.w
	}),
	41: body(fString, fString, fVarint, func(x *withBody[eventspb.Event_CancelRequested, eventspb.CancelRequested], f flat) {
		x.m.RunId, x.m.RequestId, x.m.Rollback = f.s[0], f.s[1], f.u[2] != 0
		x.w.CancelRequested, x.ev.Body = &x.m, &x.w
	}),
	42: body(fString, fVarint, fVarint, func(x *withBody[eventspb.Event_RunInterrupted, eventspb.RunInterrupted], f flat) {
		x.m.RunId, x.m.MessageSeq, x.m.Rollback = f.s[0], f.u[1], f.u[2] != 0
		x.w.RunInterrupted, x.ev.Body = &x.m, &x.w
	}),
	60: body(fString, fVarint, fNone, func(x *withBody[eventspb.Event_ThreadMetadata, eventspb.ThreadMetadata], f flat) {
		x.m.MetadataJson, x.m.Created = f.s[0], f.u[1] != 0
		x.w.ThreadMetadata, x.ev.Body = &x.m, &x.w
	}),
	61: body(fString, fNone, fNone, func(x *withBody[eventspb.Event_ThreadDeleted, eventspb.ThreadDeleted], f flat) {
		x.m.Reason = f.s[0]
		x.w.ThreadDeleted, x.ev.Body = &x.m, &x.w
	}),
}

// withBody is an event with its time and its body, in one allocation.
type withBody[W, M any] struct {
	ev eventspb.Event
	ts timestamppb.Timestamp
	w  W // the oneof wrapper
	m  M // the body
}

// body returns the spec of a body whose fields 1..3 have kinds k1..k3 and
// whose setter set copies them from a flat and links the body into the
// event (x.ev.Body) through its oneof wrapper.
func body[W, M any](k1, k2, k3 byte, set func(x *withBody[W, M], f flat)) bodySpec {
	return bodySpec{kinds: [3]byte{k1, k2, k3}, build: func(h head, f flat) *eventspb.Event {
		x := new(withBody[W, M])
		set(x, f)
		h.fill(&x.ev, &x.ts)
		return &x.ev
	}}
}

// parseFlat reads b, found at offset base of the payload str, as a flat
// message whose fields have the kinds given.
func parseFlat(b []byte, str string, base int, kinds [3]byte) (flat, bool) {
	var f flat
	var seen uint8
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 || num < 1 || num > 3 || seen&(1<<num) != 0 {
			return f, false
		}
		seen |= 1 << num
		off += n
		switch kinds[num-1] {
		case fString:
			if typ != protowire.BytesType {
				return f, false
			}
			v, n := protowire.ConsumeBytes(b[off:])
			if n < 0 {
				return f, false
			}
			s, valid := utf8String(str, base+off+n-len(v), base+off+n)
			if !valid {
				return f, false
			}
			f.s[num-1], off = s, off+n
		case fVarint:
			if typ != protowire.VarintType {
				return f, false
			}
			v, n := protowire.ConsumeVarint(b[off:])
			if n < 0 {
				return f, false
			}
			f.u[num-1], off = v, off+n
		default:
			return f, false
		}
	}
	return f, true
}
