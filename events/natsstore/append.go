package natsstore

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// Post implements [events.Poster]. The Nats-Msg-Id is <thread>:<message_id>,
// because JetStream keys ids stream-wide. m is not modified; an empty
// MessageId is filled in on a copy, and a given one must pass
// [events.ValidateMessageID].
//
// A repost of an id returns the original's ack with Duplicate set when its
// text and author are the same, and an error wrapping [events.ErrConflict]
// when they differ: the new text was not written. This holds forever, not
// only within the stream's deduplication window: before it publishes,
// Post creates the id's key in the message-id bucket (see [Store.reserveID]),
// and records the post's sequence in it after. A key costs two KV writes
// per new post and one read per repost, whatever the thread's length.
func (s *Store) Post(ctx context.Context, thread string, m *eventspb.MessagePosted, opts ...events.PostOption) (events.Ack, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return events.Ack{}, err
	}
	po, err := events.ApplyPostOptions(opts)
	if err != nil {
		return events.Ack{}, err
	}
	if m == nil {
		return events.Ack{}, fmt.Errorf("%w: nil message", events.ErrInvalidEvent)
	}
	if id := m.GetMessageId(); id != "" {
		if err := events.ValidateMessageID(id); err != nil {
			return events.Ack{}, err
		}
	}
	if _, err := events.ParseStrategy(m.GetStrategy()); err != nil {
		return events.Ack{}, err
	}
	if err := s.checkOpen(); err != nil {
		return events.Ack{}, err
	}
	if m.GetMessageId() == "" {
		m = proto.Clone(m).(*eventspb.MessagePosted)
		m.MessageId = nuid.Next()
	}
	ev := &eventspb.Event{Thread: thread, Time: timestamppb.New(s.cfg.Now()), Body: &eventspb.Event_MessagePosted{MessagePosted: m}}
	data, err := s.encode(ev)
	if err != nil {
		return events.Ack{}, err
	}
	var h events.Header
	if po.TraceParent != "" {
		h = events.Header{}
		po.SetHeaders(h)
	}
	subject := s.subj.Thread(thread, events.KindPosted)
	w := write{
		what:    "post to " + subject,
		stream:  s.threadStream(thread),
		subject: subject,
		typ:     events.TypeMessagePosted,
		header:  nats.Header(h),
		data:    data,
		msgID:   thread + ":" + m.GetMessageId(),
		// The id is the caller's: an earlier Post may have stored it. No
		// check is carried, so a repeat is always a duplicate ack.
		landedBefore: true,
	}
	if po.ExpectRun {
		// The reject strategy: land only while the run subject stands
		// where the poster read it (a literal subject, as the fence).
		run := s.subj.Thread(thread, events.KindRun)
		w.jsHeader = expectLastFor(po.ExpectRunSeq, run)
	}
	var idc idClaim
	kv := s.postIDs(ctx)
	if kv != nil {
		kctx, cancel := s.bound(ctx)
		idc = s.reserveID(kctx, kv, &w, thread, m)
		cancel()
		if idc.done {
			return idc.ack, idc.err
		}
	}
	o := s.publish(ctx, w)
	if kv != nil {
		kctx, cancel := s.bound(context.WithoutCancel(ctx))
		switch {
		case o.err == nil && o.refused == nil:
			s.recordID(kctx, kv, idc, o.ack.Seq)
		case o.refused != nil:
			s.releaseID(kctx, kv, idc)
		}
		cancel()
	}
	if o.refused != nil && po.ExpectRun {
		return events.Ack{}, fmt.Errorf("%w: post to %s expecting last seq %d on the run subject: a run started or ended, nothing written: %w",
			events.ErrConflict, subject, po.ExpectRunSeq, o.refused)
	}
	if o.refused != nil {
		// Posts carry no check; a refusal here is a server bug.
		return events.Ack{}, fmt.Errorf("natsstore: post to %s refused: %w", subject, o.refused)
	}
	if o.err == nil && o.ack.Duplicate {
		ctx, cancel := s.bound(ctx)
		defer cancel()
		if err := s.checkRepost(ctx, w.stream, subject, m, o.ack.Seq); err != nil {
			return events.Ack{}, err
		}
	}
	return o.ack, o.err
}

// checkRepost compares a post that came back as a duplicate with the
// message stored at seq under its id. The same id with another text or
// author is a conflict: JetStream kept the first and dropped this one, and
// the caller must not believe that its text was posted.
func (s *Store) checkRepost(ctx context.Context, stream, subject string, m *eventspb.MessagePosted, seq uint64) error {
	raw, err := s.getMsg(ctx, stream, msgGetRequest{Seq: seq})
	if err != nil {
		return unavailable(fmt.Sprintf("read back message %d, the original of a repost of id %q", seq, m.GetMessageId()), err)
	}
	env := s.decodeRaw(raw)
	old := env.Event.GetMessagePosted()
	switch {
	case env.Err != nil || old == nil || env.Subject != subject:
		return fmt.Errorf("%w: message id %q: seq %d, the message stored under it, is not a post to %s", events.ErrConflict, m.GetMessageId(), seq, subject)
	case old.GetMessageId() != m.GetMessageId():
		return fmt.Errorf("%w: message id %q: seq %d, named by its key, is the post of id %q", events.ErrConflict, m.GetMessageId(), seq, old.GetMessageId())
	case old.GetText() != m.GetText() || old.GetAuthor() != m.GetAuthor():
		return fmt.Errorf("%w: message id %q was posted before (seq %d) with another text or author; the new one was not written",
			events.ErrConflict, m.GetMessageId(), seq)
	}
	return nil
}

// Append implements [events.Appender]. The check becomes JetStream's
// expected-sequence headers (DESIGN §3):
//   - [events.ExpectLast]: Nats-Expected-Last-Subject-Sequence on the event's
//     own subject; refused → [events.ErrConflict];
//   - [events.Fenced]: the same header with
//     Nats-Expected-Last-Subject-Sequence-Subject naming the literal claim
//     subject <prefix>.T.claim; refused → [events.ErrThreadBusy].
//
// Both headers are stored with the event, so the audit can read them back
// from [events.Envelope].
//
// A guarded check ([events.FencedGuarded]) is sent as an atomic batch of a
// guard message and the event when the store guards (see [GuardMode]), and
// as a plain fenced append when it does not.
//
// Every append carries a Nats-Msg-Id, the caller's (see [events.WithMsgID])
// or <thread>:<nuid>; ids are keyed stream-wide, so a caller's id should
// include the thread. A retry with the same id within the stream's
// deduplication window is safe; after it, a fenced retry whose claim is
// still the newest would be stored again.
func (s *Store) Append(ctx context.Context, ev *eventspb.Event, chk events.Check, opts ...events.AppendOption) (events.Ack, error) {
	w, err := s.prepareAppend(ev, chk, opts)
	if err != nil {
		return events.Ack{}, err
	}
	if err := s.checkOpen(); err != nil {
		return events.Ack{}, err
	}
	if chk.Guarded && s.guard {
		return s.appendGuarded(ctx, ev.GetThread(), w, chk)
	}
	out := s.publish(ctx, w) // bounded by the store's Timeout
	switch {
	case out.refused != nil && chk.Mode == events.CheckFence:
		return events.Ack{}, fmt.Errorf("%w: %s fenced by claim %d: a newer claim exists, nothing written: %w",
			events.ErrThreadBusy, w.what, chk.Seq, out.refused)
	case out.refused != nil:
		return events.Ack{}, fmt.Errorf("%w: %s expecting last seq %d: the subject moved on, nothing written: %w",
			events.ErrConflict, w.what, chk.Seq, out.refused)
	}
	if out.err == nil && w.typ == events.TypeThreadConfigured {
		rctx, cancel := s.bound(context.WithoutCancel(ctx))
		s.recordConfig(rctx, ev, out.ack.Seq)
		cancel()
	}
	return out.ack, out.err
}

// prepareAppend validates and encodes an append, before any I/O.
func (s *Store) prepareAppend(ev *eventspb.Event, chk events.Check, opts []events.AppendOption) (write, error) {
	o, err := events.CheckAppend(ev, chk, opts)
	if err != nil {
		return write{}, err
	}
	if ev.GetTime() == nil {
		ev = proto.Clone(ev).(*eventspb.Event)
		ev.Time = timestamppb.New(s.cfg.Now())
	}
	data, err := s.encode(ev)
	if err != nil {
		return write{}, err
	}
	thread, typ := ev.GetThread(), events.TypeOf(ev)
	w := write{
		stream:       s.threadStream(thread),
		subject:      s.subj.Thread(thread, typ.Kind()),
		typ:          typ,
		data:         data,
		msgID:        o.MsgID,
		landedBefore: o.MsgID != "",
		after:        chk.Seq,
	}
	if w.msgID == "" {
		w.msgID = thread + ":" + nuid.Next()
	}
	// Plain concatenation: this runs on every append.
	w.what = "append " + string(typ) + " to " + w.subject
	switch chk.Mode {
	case events.CheckSubject:
		w.jsHeader = expectLast(chk.Seq)
	case events.CheckFence:
		// The literal claim subject, never a wildcard: replicated streams
		// track in-flight checks by the literal string (NATS-NOTES).
		claim := s.subj.Thread(thread, events.KindClaim)
		w.jsHeader = expectLastFor(chk.Seq, claim)
	case events.CheckNone:
		// A client-written event (events.Type.ClientWritten): deduplicated
		// by its msg id only.
	case events.CheckUnfencedForTest:
		// No check: events.CheckAppend allows this only once the test
		// helpers (eventstest.Unfenced) switched it on.
		// The write lands after the claim's marker if at all, so after
		// stays a valid lower bound for reading back.
	default:
		panic(fmt.Sprintf("natsstore: check mode %d passed events.CheckAppend", chk.Mode))
	}
	return w, nil
}

// encode marshals ev and checks its size before any I/O.
func (s *Store) encode(ev *eventspb.Event) ([]byte, error) {
	data, err := events.Marshal(ev)
	if err != nil {
		return nil, err
	}
	if len(data) > s.maxEvent {
		return nil, fmt.Errorf("%w: %s event for %s is %d bytes, over the %d-byte limit", events.ErrTooLarge, events.TypeOf(ev), ev.GetThread(), len(data), s.maxEvent)
	}
	return data, nil
}
