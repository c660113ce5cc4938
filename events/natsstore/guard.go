package natsstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/sys"
)

// GuardMode says whether a store writes the guard of a guarded consuming
// append ([events.FencedGuarded]): one JetStream atomic batch of a guard
// message on <prefix>.T.guard, which expects the run subject's last
// sequence to be the one the writer read, then the event with its claim
// fence. Without the guard, a writer with runner credentials can store a
// consuming event under the holder's claim between the holder's read and
// its own fenced write, which then lands on top of it: an I1 or I3
// violation in the holder's name (issue 23). With it, the holder's write
// is refused with [events.ErrRunMoved], and the holder reads the log again.
//
// The guard costs a second stored message per consuming write, and an
// atomic batch: nats-server 2.15 stages a batch of a single-replica file
// stream in a temporary file store that it syncs (about 6 ms per guarded
// append against 0.15 ms plain, measured), while replicated and memory
// streams stage in memory.
type GuardMode string

// The guard modes.
const (
	// GuardAuto (the default) guards on a replicated stream or a memory
	// stream, where a batch is staged in memory, and not on a
	// single-replica file stream.
	GuardAuto GuardMode = "auto"
	// GuardOn always guards. The stream must allow atomic publish.
	GuardOn GuardMode = "on"
	// GuardOff never guards: a guarded append carries the fence only.
	GuardOff GuardMode = "off"
)

// ParseGuardMode parses "auto", "on" or "off"; "" is GuardAuto.
func ParseGuardMode(s string) (GuardMode, error) {
	switch m := GuardMode(s); m {
	case "":
		return GuardAuto, nil
	case GuardAuto, GuardOn, GuardOff:
		return m, nil
	}
	return "", fmt.Errorf("natsstore: guard mode %q: want auto, on or off", s)
}

// guards decides whether a store on a stream of config c guards.
func (m GuardMode) guards(c jetstream.StreamConfig) (bool, error) {
	switch m {
	case GuardOff:
		return false, nil
	case GuardOn:
		if !c.AllowAtomicPublish {
			return false, fmt.Errorf("%w: stream %s has no atomic batch publish, which the guard (Config.Guard on) needs", events.ErrUnsafeConfig, c.Name)
		}
		return true, nil
	}
	return c.AllowAtomicPublish && (c.Replicas > 1 || c.Storage == jetstream.MemoryStorage), nil
}

// Guarded reports whether the store writes guards (see [GuardMode]).
func (s *Store) Guarded() bool { return s.guard }

// appendGuarded sends w, a fenced consuming append, as one atomic batch
// after a guard message that expects runSeq on the run subject (the guard
// must come first: the server refuses a check on a subject written earlier
// in the batch, 10164, and the event's own check is on the claim subject,
// which the guard does not write). Like publish it retries until the
// outcome is known, and settles an ambiguous one by reading the run subject
// back for w's msg id: a resent batch that had landed is refused whole,
// with 10201 (a duplicate msg id) or 10071.
func (s *Store) appendGuarded(ctx context.Context, thread string, w write, chk events.Check) (events.Ack, error) {
	gw := write{
		stream:  w.stream,
		subject: s.subj.Thread(thread, events.KindGuard),
		msgID:   w.msgID + ":guard",
		// The literal run subject, never a wildcard (NATS-NOTES).
		jsHeader: expectLastFor(chk.RunSeq, w.subject),
	}
	maybeLanded := w.landedBefore
	detached := context.WithoutCancel(ctx)
	bctx, cancel := s.bound(ctx)
	defer cancel()
	var lastErr error
	for attempt := range maxPublishAttempts {
		if attempt > 0 && !sys.Sleep(bctx, backoff(attempt)) {
			break
		}
		if bctx.Err() != nil {
			break // send nothing: a guard without its commit holds an open batch
		}
		// Each attempt waits a part of the call's bound, as publish's do,
		// so a lost reply leaves time to resend and settle.
		actx, acancel := context.WithTimeout(bctx, max(s.cfg.Timeout/4, minAttemptTimeout))
		ack, err := s.sendBatch(actx, []*nats.Msg{gw.msg(), w.msg()})
		acancel()
		if err == nil {
			if ack.BatchSize != 2 {
				lastErr = fmt.Errorf("commit acked %d messages at seq %d, sent 2", ack.BatchSize, ack.Sequence)
				maybeLanded = true
				break
			}
			return events.Ack{Seq: ack.Sequence}, nil
		}
		lastErr = err
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) {
			if errors.Is(err, errNotSent) || errors.Is(err, nats.ErrNoResponders) {
				continue // nothing stored by this attempt
			}
			maybeLanded = true // a lost reply: the batch may have landed
			continue
		}
		switch {
		case apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence:
			return s.guardRefused(detached, thread, w, chk, maybeLanded, err)
		case apiErr.ErrorCode == errCodeBatchDupMsgID:
			// Our msg id is stored: an earlier attempt (or call) landed,
			// or a forger took the id first. Reading back tells.
			return s.guardSettle(detached, w, err)
		case isNoStorage(apiErr.ErrorCode):
			if maybeLanded {
				return s.guardSettle(detached, w, fmt.Errorf("%w: %w", err, events.ErrNoStorage))
			}
			return events.Ack{}, fmt.Errorf("natsstore: guarded %s: %w: %w", w.what, events.ErrNoStorage, err)
		case apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant,
			apiErr.ErrorCode == errCodeBatchIncomplete, apiErr.ErrorCode == errCodeBatchTooMany, apiErr.Code == 503:
			// No verdict (a proposal on a checked subject in flight, a
			// lost part, too many open batches on the stream, an
			// election): nothing of this attempt stored.
		default:
			if maybeLanded {
				return s.guardSettle(detached, w, err)
			}
			return events.Ack{}, fmt.Errorf("natsstore: guarded %s refused, nothing written: %w", w.what, err)
		}
	}
	if lastErr == nil {
		lastErr = bctx.Err()
	}
	if maybeLanded {
		return s.guardSettle(detached, w, lastErr)
	}
	if apiCode(lastErr) == jetstream.JSErrCodeStreamWrongLastSequenceConstant {
		// Refused every time while another proposal on a checked subject
		// was in flight: nothing of ours was written; read again.
		return events.Ack{}, fmt.Errorf("%w: guarded %s: another write on the thread was in flight every time, nothing written: %w",
			events.ErrConflict, w.what, lastErr)
	}
	return events.Ack{}, fmt.Errorf("natsstore: guarded %s: not written after %d attempts: %w: %w", w.what, maxPublishAttempts, events.ErrUnavailable, lastErr)
}

// guardRefused maps a failed check of a guarded append: the server does not
// say which of the two failed, so the claim subject is read back. Never
// under RUNFENCE, where markers are not on the claim subject: Append sends
// a guarded append there with appendRunFenced, which reads the run subject. A newer
// claim marker means the fence failed ([events.ErrThreadBusy]); else the
// run subject moved ([events.ErrRunMoved]). Claim sequences only grow, so a
// fence that failed still fails on the read-back. When an earlier attempt
// may have landed, the run subject is read for w's msg id first.
func (s *Store) guardRefused(detached context.Context, thread string, w write, chk events.Check, maybeLanded bool, refusal error) (events.Ack, error) {
	ctx, cancel := s.settleContext(detached)
	defer cancel()
	if maybeLanded {
		ack, found, err := s.findLanded(ctx, w)
		if err != nil {
			return events.Ack{}, unknownOutcome(w, errors.Join(refusal, err))
		}
		if found {
			return ack, nil
		}
	}
	last, err := s.LastSeq(ctx, thread, events.KindClaim)
	switch {
	case err != nil:
		// Nothing was written; which check failed is unknown. A conflict
		// makes the writer read the log, which tells.
		return events.Ack{}, fmt.Errorf("%w: guarded %s: refused, nothing written; reading the claim subject back failed: %w",
			events.ErrConflict, w.what, errors.Join(refusal, err))
	case last != chk.Seq:
		return events.Ack{}, fmt.Errorf("%w: %s fenced by claim %d: a newer claim exists (%d), nothing written: %w",
			events.ErrThreadBusy, w.what, chk.Seq, last, refusal)
	}
	return events.Ack{}, fmt.Errorf("%w: %w: guarded %s expected last run seq %d: a run event this writer has not read landed, nothing written: %w",
		events.ErrConflict, events.ErrRunMoved, w.what, chk.RunSeq, refusal)
}

// guardSettle decides a guarded append whose outcome is unknown by reading
// the run subject back for w's msg id, on a fresh context bounded by the
// store's Timeout (the caller's may have ended).
func (s *Store) guardSettle(detached context.Context, w write, cause error) (events.Ack, error) {
	ctx, cancel := s.settleContext(detached)
	defer cancel()
	ack, found, err := s.findLanded(ctx, w)
	switch {
	case err != nil:
		return events.Ack{}, unknownOutcome(w, errors.Join(cause, err))
	case found:
		return ack, nil
	}
	return events.Ack{}, unknownOutcome(w, cause)
}
