package natsstore

import (
	"cmp"
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
	p, err := s.preparePost(thread, m, opts)
	if err != nil {
		return events.Ack{}, err
	}
	if err := p.encode(s); err != nil {
		return events.Ack{}, err
	}
	var idc idClaim
	kv := s.postIDs(ctx)
	if kv != nil {
		kctx, cancel := s.bound(ctx)
		idc = s.reserveID(kctx, kv, &p.w, thread, p.m)
		cancel()
		if idc.done {
			return idc.ack, idc.err
		}
	}
	ack, _, err := s.publishPost(ctx, p, kv, idc)
	return ack, err
}

// postWrite is a post, checked and ready to publish.
type postWrite struct {
	thread string
	m      *eventspb.MessagePosted // with its message id
	po     events.PostOptions
	w      write // without data until encode
}

// preparePost validates a post and fills in its message id, before any
// I/O.
func (s *Store) preparePost(thread string, m *eventspb.MessagePosted, opts []events.PostOption) (postWrite, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return postWrite{}, err
	}
	po, err := events.ApplyPostOptions(opts)
	if err != nil {
		return postWrite{}, err
	}
	if m == nil {
		return postWrite{}, fmt.Errorf("%w: nil message", events.ErrInvalidEvent)
	}
	if id := m.GetMessageId(); id != "" {
		if err := events.ValidateMessageID(id); err != nil {
			return postWrite{}, err
		}
	}
	if _, err := events.ParseStrategy(m.GetStrategy()); err != nil {
		return postWrite{}, err
	}
	if err := s.checkOpen(); err != nil {
		return postWrite{}, err
	}
	if m.GetMessageId() == "" {
		m = proto.Clone(m).(*eventspb.MessagePosted)
		m.MessageId = nuid.Next()
	}
	var h events.Header
	if po.TraceParent != "" {
		h = events.Header{}
		po.SetHeaders(h)
	}
	subject := s.subj.Thread(thread, events.KindPosted)
	p := postWrite{thread: thread, m: m, po: po, w: write{
		what:    "post to " + subject,
		stream:  s.threadStream(thread),
		subject: subject,
		typ:     events.TypeMessagePosted,
		header:  nats.Header(h),
		msgID:   thread + ":" + m.GetMessageId(),
		// The id is the caller's: an earlier Post may have stored it. No
		// check is carried, so a repeat is always a duplicate ack.
		landedBefore: true,
	}}
	if po.ExpectRun {
		p.expectRun(s, po.ExpectRunSeq)
	}
	return p, nil
}

// expectRun makes p land only while the run subject's last sequence is seq:
// the reject strategy's check (a literal subject, as the fence).
func (p *postWrite) expectRun(s *Store, seq uint64) {
	p.po.ExpectRun, p.po.ExpectRunSeq = true, seq
	p.w.jsHeader = expectLastFor(seq, s.subj.Thread(p.thread, events.KindRun))
}

// encode makes p's event.
func (p *postWrite) encode(s *Store) error {
	ev := &eventspb.Event{Thread: p.thread, Time: timestamppb.New(s.cfg.Now()), Body: &eventspb.Event_MessagePosted{MessagePosted: p.m}}
	data, err := s.encode(ev)
	p.w.data = data
	return err
}

// publishPost publishes p, whose id idc reserved, then records its
// sequence in the id key, or frees the key when the post was refused.
// refused reports a refusal of the reject strategy's check.
func (s *Store) publishPost(ctx context.Context, p postWrite, kv jetstream.KeyValue, idc idClaim) (ack events.Ack, refused bool, err error) {
	o := s.publish(ctx, p.w)
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
	subject := p.w.subject
	if o.refused != nil && p.po.ExpectRun {
		return events.Ack{}, true, fmt.Errorf("%w: post to %s expecting last seq %d on the run subject: a run started or ended, nothing written: %w",
			events.ErrConflict, subject, p.po.ExpectRunSeq, o.refused)
	}
	if o.refused != nil {
		// Posts carry no check; a refusal here is a server bug.
		return events.Ack{}, false, fmt.Errorf("natsstore: post to %s refused: %w", subject, o.refused)
	}
	if o.err == nil && o.ack.Duplicate {
		ctx, cancel := s.bound(ctx)
		defer cancel()
		if err := s.checkRepost(ctx, p.w.stream, subject, p.m, o.ack.Seq); err != nil {
			return events.Ack{}, false, err
		}
	}
	return o.ack, false, o.err
}

var _ events.StrategyPoster = (*Store)(nil)

// PostThreadStrategy implements [events.StrategyPoster]. The head's reads
// (see [Store.ThreadHead]) and the create of the post's id key go out
// together, so a post waits for one round of reads and writes less than
// when it reads the head first. A post the head then refuses (reject and
// busy) frees the key it created.
func (s *Store) PostThreadStrategy(ctx context.Context, thread string, m *eventspb.MessagePosted, opts ...events.PostOption) (events.Ack, bool, error) {
	p, err := s.preparePost(thread, m, opts)
	if err != nil {
		return events.Ack{}, true, err
	}
	if p.m.GetStrategy() != "" || p.po.ExpectRun {
		return events.Ack{}, false, nil // the caller's to decide
	}
	kv := s.postIDs(ctx)
	if kv == nil {
		return events.Ack{}, false, nil
	}
	var (
		h    events.Head
		herr error
		wg   sync.WaitGroup
	)
	wg.Go(func() { h, herr = s.ThreadHead(ctx, thread, "") })
	kctx, cancel := s.bound(ctx)
	idc := s.reserveID(kctx, kv, &p.w, thread, p.m)
	cancel()
	wg.Wait()
	if idc.done {
		return idc.ack, true, idc.err // a repost is answered whatever the strategy
	}
	free := func() {
		if idc.created {
			kctx, cancel := s.bound(context.WithoutCancel(ctx))
			s.releaseID(kctx, kv, idc)
			cancel()
		}
	}
	if herr != nil || !h.StrategyKnown {
		free()
		return events.Ack{}, herr != nil, herr
	}
	st := cmp.Or(h.Strategy, events.StrategyEnqueue)
	p.m = proto.Clone(p.m).(*eventspb.MessagePosted)
	p.m.Strategy = string(st)
	if st == events.StrategyReject {
		if h.ActiveRun != "" {
			free()
			return events.Ack{}, true, fmt.Errorf("%w: run %s is active, and the thread's strategy is reject: nothing written", events.ErrThreadBusy, h.ActiveRun)
		}
		p.expectRun(s, h.LastRunSeq)
	}
	if err := p.encode(s); err != nil {
		free()
		return events.Ack{}, true, err
	}
	ack, refused, err := s.publishPost(ctx, p, kv, idc)
	if refused {
		return events.Ack{}, false, nil // a run started or ended: read again
	}
	return ack, true, err
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
// Under the RUNFENCE layout (Config.Fence run) claim markers and releases
// go to the run subject, a guarded check is one message there expecting
// its RunSeq (no -Subject header, no guard), refused with
// [events.ErrThreadBusy] when a marker landed after RunSeq and with
// [events.ErrRunMoved] and [events.ErrConflict] otherwise, and an
// unguarded [events.Fenced] is refused with [events.ErrInvalidEvent].
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
	if chk.Mode == events.CheckFence && s.subj.RunFence {
		return s.appendRunFenced(ctx, w)
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
	o, err := s.subj.CheckAppend(ev, chk, opts)
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
		subject:      s.subj.Thread(thread, s.subj.KindOf(typ)),
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
	switch {
	case chk.Mode == events.CheckSubject:
		w.jsHeader = expectLast(chk.Seq)
	case chk.Mode == events.CheckFence && s.subj.RunFence:
		// RUNFENCE: a compare-and-set on the event's own subject, the run
		// subject, expecting the holder's K (Subjects.CheckAppend let only
		// a guarded fence through); no -Subject header.
		w.jsHeader = expectLast(chk.RunSeq)
		w.after = chk.RunSeq
	case chk.Mode == events.CheckFence:
		// The literal claim subject, never a wildcard: replicated streams
		// track in-flight checks by the literal string (NATS-NOTES).
		claim := s.subj.Thread(thread, events.KindClaim)
		w.jsHeader = expectLastFor(chk.Seq, claim)
	case chk.Mode == events.CheckNone:
		// A client-written event (events.Type.ClientWritten): deduplicated
		// by its msg id only.
	case chk.Mode == events.CheckUnfencedForTest:
		// No check: events.CheckAppend allows this only once the test
		// helpers (eventstest.Unfenced) switched it on.
		// The write lands after the claim's marker if at all, so after
		// stays a valid lower bound for reading back.
	default:
		panic(fmt.Sprintf("natsstore: check mode %d passed events.CheckAppend", chk.Mode))
	}
	return w, nil
}

// appendRunFenced sends w, a consuming append under RUNFENCE: one message
// on the run subject expecting the holder's K (w.after), no guard, no
// batch. publish settles a possibly landed earlier attempt by its msg id;
// a refusal is classified by the markers after K (runFenceRefused).
func (s *Store) appendRunFenced(ctx context.Context, w write) (events.Ack, error) {
	out := s.publish(ctx, w)
	if out.refused != nil {
		return events.Ack{}, s.runFenceRefused(context.WithoutCancel(ctx), w, out.refused)
	}
	return out.ack, out.err
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
