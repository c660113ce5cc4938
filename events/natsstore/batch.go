package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/sys"
)

// MaxBatch is the most events one [Store.AppendBatch] sends: nats-server's
// default limit on an atomic batch.
const MaxBatch = 1000

// Atomic batch headers (nats-server v2.12+, stream AllowAtomicPublish).
const (
	hdrBatchID     = "Nats-Batch-Id"       // at most 64 characters
	hdrBatchSeq    = "Nats-Batch-Sequence" // 1..n, no gaps
	hdrBatchCommit = "Nats-Batch-Commit"   // "1" on the last message
)

// Server error codes specific to atomic batches.
const (
	// errCodeBatchDupMsgID: a message id of the batch is repeated in it or
	// already stored in the deduplication window; nothing of the batch is
	// written.
	errCodeBatchDupMsgID jetstream.ErrorCode = 10201
	// errCodeBatchIncomplete: the server lost part of the batch (gap,
	// 10 s timeout, leader change); nothing is written.
	errCodeBatchIncomplete jetstream.ErrorCode = 10176
	// errCodeBatchTooMany: the stream (50) or the server (1,000) has too
	// many batches open; the batch was not started, nothing is written.
	errCodeBatchTooMany jetstream.ErrorCode = 10210
)

// BatchItem is one append of a batch: an event, the check it carries (as
// for [Store.Append]) and an optional Nats-Msg-Id (empty: <thread>:<nuid>).
type BatchItem struct {
	Event *eventspb.Event
	Check events.Check
	MsgID string
}

// AppendBatch appends items to one thread as a single JetStream atomic
// batch, in one round trip: either every item lands, at consecutive stream
// sequences in the given order, or nothing does. Each message carries its
// own expected-sequence headers exactly as [Store.Append] would send them,
// and all of them are checked before any is stored. The acks are in item
// order.
//
// Valid batches. Before anything is sent, AppendBatch refuses with
// [events.ErrInvalidEvent] a batch that is empty, longer than [MaxBatch],
// spans threads, repeats a message id, has an item that fails
// [events.CheckAppend], or has a shape the server would refuse. The server
// checks every item against the stream as it was before the batch, and
// refuses (10164) an item whose check names a subject written by an earlier
// item of the same batch. So, per thread subject (claim, run):
//   - any number of [events.Fenced] items, all under the same claim, as long
//     as no earlier item wrote the claim subject: fenced items come before
//     any thread_claimed/thread_released;
//   - at most one [events.ExpectLast] item per subject, and it must be the
//     first item that writes that subject: a run_output, request_opened,
//     run_completed or run_failed can open a batch's run events, never
//     follow another run event of it.
//
// For example [run_completed (CAS), run_started (fenced), steering_given
// (fenced)...] and [run_abandoned (fenced)..., thread_released (CAS)] are
// valid; [thread_claimed (CAS), run_abandoned (fenced)] and [run_started
// (fenced), run_output (CAS)] are not.
//
// Refusals. When a check fails, nothing is written and the error wraps
// [events.ErrThreadBusy] if a fence failed (the claim subject moved past the
// fence; read back when the batch also has compare-and-sets) and
// [events.ErrConflict] otherwise.
//
// Unknown outcomes. AppendBatch does not retry once the commit has been
// sent: when its reply is lost (timeout, disconnect) the error wraps
// [events.ErrUnavailable] and says the outcome is unknown. To settle it,
// read the thread back, or resend the same items with the same MsgIDs within
// the deduplication window: nats-server checks message ids before the
// expected sequences, so a batch that landed is refused as a whole with
// 10201 (duplicate message id) rather than stored twice.
func (s *Store) AppendBatch(ctx context.Context, items []BatchItem) ([]events.Ack, error) {
	msgs, fence, hasCAS, err := s.prepareBatch(items)
	if err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	thread := items[0].Event.GetThread()
	what := fmt.Sprintf("batch of %d appends to %s", len(items), s.subj.Thread(thread, events.KindRun))
	ctx, cancel := s.bound(ctx)
	defer cancel()

	var lastErr error
	for attempt := range maxPublishAttempts {
		if attempt > 0 && !sys.Sleep(ctx, backoff(attempt)) {
			break
		}
		ack, err := s.sendBatch(ctx, msgs)
		if err == nil {
			n := uint64(len(msgs))
			if ack.BatchSize != n || ack.Sequence < n {
				return nil, fmt.Errorf("natsstore: %s: commit ack for %d messages at seq %d: %w: outcome unclear", what, ack.BatchSize, ack.Sequence, events.ErrUnavailable)
			}
			acks := make([]events.Ack, n)
			for i := range acks {
				acks[i].Seq = ack.Sequence - n + 1 + uint64(i)
			}
			return acks, nil
		}
		lastErr = err
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) {
			if errors.Is(err, nats.ErrNoResponders) {
				return nil, fmt.Errorf("natsstore: %s: no stream answered, nothing written: %w: %w", what, events.ErrUnavailable, err)
			}
			if errors.Is(err, errNotSent) {
				return nil, fmt.Errorf("natsstore: %s: commit not sent, nothing written: %w: %w", what, events.ErrUnavailable, err)
			}
			return nil, fmt.Errorf("natsstore: %s: outcome unknown (not retried; read the thread back, or resend with the same msg ids): %w: %w",
				what, events.ErrUnavailable, err)
		}
		switch {
		case apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence:
			return nil, s.batchRefused(ctx, what, thread, fence, hasCAS, err)
		case isNoStorage(apiErr.ErrorCode):
			return nil, fmt.Errorf("natsstore: %s: %w: %w", what, events.ErrNoStorage, err)
		case apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant,
			apiErr.ErrorCode == errCodeBatchIncomplete, apiErr.Code == 503:
			// The whole batch was refused without a verdict on its checks
			// (another proposal on a checked subject in flight, a lost
			// part, an election): nothing written; send it again.
			continue
		case apiErr.ErrorCode == errCodeBatchDupMsgID:
			return nil, fmt.Errorf("natsstore: %s: a message id is already stored (did an earlier send of this batch land?), nothing written by this call: %w", what, err)
		default:
			return nil, fmt.Errorf("natsstore: %s: refused, nothing written: %w", what, err)
		}
	}
	if lastErr == nil {
		lastErr = ctx.Err()
	}
	if apiCode(lastErr) == jetstream.JSErrCodeStreamWrongLastSequenceConstant {
		// As Append: refused every time while another writer's proposal on
		// a checked subject was in flight.
		return nil, s.batchRefused(ctx, what, thread, fence, hasCAS, lastErr)
	}
	return nil, fmt.Errorf("natsstore: %s: not written after %d attempts: %w: %w", what, maxPublishAttempts, events.ErrUnavailable, lastErr)
}

// batchRefused maps a failed check to ErrThreadBusy or ErrConflict (under
// RUNFENCE always ErrConflict: prepareBatch lets no fence through, so the
// claim subject is never read). The
// server does not say which item's check failed; when the batch mixes a
// fence and compare-and-sets, the claim subject is read back: a fence that
// is no longer the newest claim is the refusal that matters.
func (s *Store) batchRefused(ctx context.Context, what, thread string, fence *uint64, hasCAS bool, refusal error) error {
	busy := fence != nil && !hasCAS
	if fence != nil && hasCAS {
		last, err := s.LastSeq(ctx, thread, events.KindClaim)
		busy = err != nil || last != *fence
		if err != nil {
			refusal = errors.Join(refusal, fmt.Errorf("reading the claim subject back: %w", err))
		}
	}
	if busy {
		return fmt.Errorf("%w: %s fenced by claim %d: a newer claim exists, nothing written: %w",
			events.ErrThreadBusy, what, *fence, refusal)
	}
	return fmt.Errorf("%w: %s: a compare-and-set failed, the subject moved on, nothing written: %w",
		events.ErrConflict, what, refusal)
}

// prepareBatch validates and encodes items before any I/O. It returns the
// messages without batch headers, the fence seq if any item is fenced, and
// whether any item carries a compare-and-set.
func (s *Store) prepareBatch(items []BatchItem) (msgs []*nats.Msg, fence *uint64, hasCAS bool, err error) {
	switch {
	case len(items) == 0:
		return nil, nil, false, fmt.Errorf("%w: empty batch", events.ErrInvalidEvent)
	case len(items) > MaxBatch:
		return nil, nil, false, fmt.Errorf("%w: batch of %d appends, over the limit of %d", events.ErrInvalidEvent, len(items), MaxBatch)
	}
	var (
		thread  = items[0].Event.GetThread()
		written = make(map[string]int, 2)    // subject -> first item writing it
		checked = make(map[string]uint64, 2) // subject -> expected seq
		ids     = make(map[string]int, len(items))
	)
	msgs = make([]*nats.Msg, len(items))
	for i, it := range items {
		var opts []events.AppendOption
		if it.MsgID != "" {
			opts = []events.AppendOption{events.WithMsgID(it.MsgID)}
		}
		if it.Check.Mode == events.CheckFence && s.subj.RunFence {
			// RUNFENCE has no claim-subject fence: a batch's check is a
			// compare-and-set on the run subject, on its first item.
			return nil, nil, false, fmt.Errorf("%w: batch item %d is fenced, which the run-subject fence layout does not take in a batch: check the run subject with ExpectLast on the first item", events.ErrInvalidEvent, i)
		}
		if it.Check.Guarded {
			// The guard is a batch of its own (appendGuarded); inside
			// another it would be dropped without a word.
			return nil, nil, false, fmt.Errorf("%w: batch item %d is guarded: append it alone", events.ErrInvalidEvent, i)
		}
		w, err := s.prepareAppend(it.Event, it.Check, opts)
		if err != nil {
			return nil, nil, false, fmt.Errorf("batch item %d: %w", i, err)
		}
		if th := it.Event.GetThread(); th != thread {
			return nil, nil, false, fmt.Errorf("%w: batch item %d is on thread %q, item 0 on %q: a batch is one thread's", events.ErrInvalidEvent, i, th, thread)
		}
		if j, dup := ids[w.msgID]; dup {
			return nil, nil, false, fmt.Errorf("%w: batch items %d and %d share msg id %q", events.ErrInvalidEvent, j, i, w.msgID)
		}
		ids[w.msgID] = i
		m := w.msg()  // with the check's headers, as Append sends it
		var on string // the subject the check reads
		switch it.Check.Mode {
		case events.CheckFence:
			on = s.subj.Thread(thread, events.KindClaim)
			seq := it.Check.Seq
			fence = &seq
		case events.CheckSubject:
			on = w.subject
			hasCAS = true
		}
		if on != "" {
			if j, ok := written[on]; ok {
				return nil, nil, false, fmt.Errorf("%w: batch item %d checks %s, which item %d writes first: the server refuses a check on a subject written earlier in the batch",
					events.ErrInvalidEvent, i, on, j)
			}
			if seq, ok := checked[on]; ok && seq != it.Check.Seq {
				return nil, nil, false, fmt.Errorf("%w: batch item %d expects last seq %d on %s, an earlier item %d: both cannot hold",
					events.ErrInvalidEvent, i, it.Check.Seq, on, seq)
			}
			checked[on] = it.Check.Seq
		}
		if _, ok := written[w.subject]; !ok {
			written[w.subject] = i
		}
		msgs[i] = m
	}
	return msgs, fence, hasCAS, nil
}

// errNotSent marks a failure before the commit was sent: nothing can have
// been written.
var errNotSent = errors.New("batch not sent")

// batchAck is the commit's reply: a PubAck with the batch's id and size, or
// an API error.
type batchAck struct {
	Stream    string              `json:"stream"`
	Sequence  uint64              `json:"seq"` // the last message's
	BatchID   string              `json:"batch"`
	BatchSize uint64              `json:"count"`
	Error     *jetstream.APIError `json:"error,omitempty"`
}

// sendBatch sends msgs as one atomic batch under a fresh id: every message
// but the last is published without a reply subject (the server then sends
// no flow-control ack; a message it fails to stage leaves a gap, and the
// commit is refused as incomplete), and the last, carrying the commit, is a
// request. The connection keeps the order.
func (s *Store) sendBatch(ctx context.Context, msgs []*nats.Msg) (batchAck, error) {
	id := nuid.Next()
	last := len(msgs) - 1
	for i, m := range msgs {
		m.Reply = ""
		m.Header.Set(hdrBatchID, id)
		m.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
		if i < last {
			m.Header.Del(hdrBatchCommit)
			if err := s.nc.PublishMsg(m); err != nil {
				return batchAck{}, fmt.Errorf("%w: message %d: %w", errNotSent, i+1, err)
			}
		}
	}
	msgs[last].Header.Set(hdrBatchCommit, "1")
	resp, err := s.nc.RequestMsgWithContext(ctx, msgs[last])
	if err != nil {
		return batchAck{}, err
	}
	var ack batchAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return batchAck{}, fmt.Errorf("commit reply %q: %w", resp.Data, err)
	}
	if ack.Error != nil {
		return batchAck{}, ack.Error
	}
	if ack.BatchID != id {
		return batchAck{}, fmt.Errorf("commit acked batch %q, sent %q", ack.BatchID, id)
	}
	return ack, nil
}
