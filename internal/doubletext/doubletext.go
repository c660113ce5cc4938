// Package doubletext posts messages under their double-texting strategy
// (issue 15) and writes cancel requests: the client side of the strategies.
// The runner side is in actors/thread (strategy.go).
//
// Only the reject strategy needs the poster's help: a post that would land
// while a run is active is refused, atomically. [Poster.Post] reads the
// thread's head ([events.HeadReader]: the run subject's last event, the
// strategy, the post's id; a few reads whatever the thread's length), and
// posts only if no run is active, with a check on the thread's
// run subject at the sequence it read ([events.WithExpectRunSeq]). A run
// that starts between the read and the post moves the run subject, so
// JetStream refuses the post and nothing is written; the poster reads again
// and finds the run active. A store that is an [events.StrategyPoster]
// reads the head while it makes the post's id key, and Poster asks it
// first. The other strategies are carried by the post itself and acted on
// by the thread's holder.
package doubletext

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections"
)

// Store is what a Poster needs: posts, and reads of the thread.
type Store interface {
	events.Poster
	events.Reader
}

// maxAttempts bounds the read-then-post loop of a reject post. Each retry
// means a run started or ended between the read and the post; a busy thread
// is found on the next read.
const maxAttempts = 8

// Poster is an [events.Poster] that honours the reject strategy. Posts of
// other strategies pass through; a post that names none is given the
// thread's, read first (it may be reject).
type Poster struct {
	Store Store
}

// Post posts m to thread. When its strategy, or the thread's if it names
// none, is reject, and a run is active, it returns an error wrapping
// [events.ErrThreadBusy] that names the run, and nothing is written. A
// repost of a message id already in the thread returns the original, as
// Store.Post does, even while the thread is busy.
func (p Poster) Post(ctx context.Context, thread string, m *eventspb.MessagePosted, opts ...events.PostOption) (events.Ack, error) {
	st, err := events.ParseStrategy(m.GetStrategy())
	if err != nil {
		return events.Ack{}, fmt.Errorf("doubletext: %w", err)
	}
	if st != "" && st != events.StrategyReject {
		return p.Store.Post(ctx, thread, m, opts...)
	}
	if sp, ok := p.Store.(events.StrategyPoster); ok && st == "" {
		// The store reads the head while it writes: fewer round trips.
		if ack, decided, err := sp.PostThreadStrategy(ctx, thread, m, opts...); decided {
			return ack, err
		}
	}
	var lastRun uint64
	var lastErr error
	for attempt := 0; ; attempt++ {
		v, err := p.read(ctx, thread, "")
		if err != nil {
			return events.Ack{}, err
		}
		if st == "" {
			// Name the thread's strategy as read in the post: a
			// thread_configured landing meanwhile does not make an
			// enqueued post a reject post that skipped the check.
			st = cmp.Or(v.strategy, events.StrategyEnqueue)
			m = proto.Clone(m).(*eventspb.MessagePosted)
			m.Strategy = string(st)
		}
		if st != events.StrategyReject {
			return p.Store.Post(ctx, thread, m, opts...)
		}
		if v.activeRun != "" && m.GetMessageId() != "" {
			// Busy: only a repost may go on. The id is read only now, so
			// the usual post costs no read of it.
			if v, err = p.read(ctx, thread, m.GetMessageId()); err != nil {
				return events.Ack{}, err
			}
		}
		if v.posted != 0 {
			// A repost: the store answers it from the id (a duplicate
			// or a conflict) and carries no check for it.
			return p.Store.Post(ctx, thread, m, opts...)
		}
		if v.activeRun != "" {
			return events.Ack{}, fmt.Errorf("%w: run %s%s is active, and the post's strategy is reject: nothing written",
				events.ErrThreadBusy, v.activeRun, v.startedAt)
		}
		if attempt > 0 && v.lastRun == lastRun {
			// The conflict was not the run subject's move (a repost of
			// the id with another text, say).
			return events.Ack{}, lastErr
		}
		lastRun = v.lastRun
		ack, err := p.Store.Post(ctx, thread, m, append(opts[:len(opts):len(opts)], events.WithExpectRunSeq(lastRun))...)
		if err == nil || !errors.Is(err, events.ErrConflict) {
			return ack, err
		}
		lastErr = err
		if attempt+1 >= maxAttempts {
			return events.Ack{}, fmt.Errorf("%w: the run subject of %s keeps moving: %w", events.ErrThreadBusy, thread, err)
		}
	}
}

// view is what a post reads of its thread.
type view struct {
	strategy  events.Strategy
	lastRun   uint64 // the run subject's last sequence
	activeRun string // "" when no run is active
	startedAt string // ", started at N", when known
	posted    uint64 // the message with the post's id, 0 when none
}

// read returns what a post needs of thread: from the store's
// [events.HeadReader] in a few reads when it has one, else by folding the
// thread.
func (p Poster) read(ctx context.Context, thread, id string) (view, error) {
	if hr, ok := p.Store.(events.HeadReader); ok {
		h, err := hr.ThreadHead(ctx, thread, id)
		if err != nil {
			return view{}, err
		}
		if h.StrategyKnown {
			return view{strategy: h.Strategy, lastRun: h.LastRunSeq, activeRun: h.ActiveRun, posted: h.Posted}, nil
		}
	}
	envs, err := p.Store.Load(ctx, thread, 1)
	if err == nil {
		// A fork's strategy rule counts its history's messages.
		err = projections.ResolveFirst(ctx, p.Store, envs)
	}
	if err != nil {
		return view{}, err
	}
	t := projections.Fold(thread, envs)
	v := view{strategy: t.Strategy, lastRun: t.LastRunSubjectSeq}
	if r := t.ActiveRun; r != nil {
		v.activeRun, v.startedAt = r.ID, fmt.Sprintf(", started at %d,", r.StartSeq)
	}
	if msg, ok := t.MessageByID(id); ok && id != "" {
		v.posted = msg.Seq
	}
	return v, nil
}

// Cancel writes a cancel request for run ("" for the run active when the
// request is stored) in thread, at time now. requestID, 1 to 128
// characters from [A-Za-z0-9_-], makes it idempotent; "" picks a fresh one.
// The thread's holder cancels the run, which ends as run_failed with reason
// "cancelled"; a run that is not active when the request is stored is left
// alone.
func Cancel(ctx context.Context, s events.Appender, thread, runID, requestID string, now time.Time) (events.Ack, error) {
	return cancel(ctx, s, thread, runID, requestID, now, false)
}

// CancelRollback is [Cancel], and the run is left out of the history later
// runs get, as under a rollback post.
func CancelRollback(ctx context.Context, s events.Appender, thread, runID, requestID string, now time.Time) (events.Ack, error) {
	return cancel(ctx, s, thread, runID, requestID, now, true)
}

func cancel(ctx context.Context, s events.Appender, thread, runID, requestID string, now time.Time, rollback bool) (events.Ack, error) {
	if requestID == "" {
		var b [12]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand)
		requestID = hex.EncodeToString(b[:])
	}
	if err := events.ValidateMessageID(requestID); err != nil {
		return events.Ack{}, fmt.Errorf("doubletext: cancel request id: %w", err)
	}
	ev := events.NewCancelRequested(thread, now, runID, requestID)
	ev.GetCancelRequested().Rollback = rollback
	return s.Append(ctx, ev, events.Check{}, events.WithMsgID(thread+":cancel:"+requestID))
}

// Configure sets thread's strategy with a thread_configured event at time
// now.
func Configure(ctx context.Context, s events.Appender, thread string, st events.Strategy, now time.Time) (events.Ack, error) {
	if _, err := events.ParseStrategy(string(st)); err != nil || st == "" {
		return events.Ack{}, fmt.Errorf("doubletext: configure %s: strategy %q: want enqueue, reject, interrupt or rollback", thread, st)
	}
	return s.Append(ctx, events.NewThreadConfigured(thread, now, st), events.Check{})
}
