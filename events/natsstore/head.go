package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

var _ events.HeadReader = (*Store)(nil)

// configRecord is a thread's strategy key in the message-id bucket: the key
// is the thread id alone (a message id's key is <thread>.<id>), written
// after each thread_configured lands, with that event's sequence so that
// an older configure never overwrites a newer one.
type configRecord struct {
	Strategy events.Strategy `json:"strategy"`
	Seq      uint64          `json:"seq"`
}

// ThreadHead implements [events.HeadReader] in at most four reads, made at
// once, so that it costs one round trip: the run subject's last message,
// the thread's strategy key, its first posted event (used only when the
// key is missing), and messageID's key.
func (s *Store) ThreadHead(ctx context.Context, thread, messageID string) (events.Head, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return events.Head{}, err
	}
	if err := s.checkOpen(); err != nil {
		return events.Head{}, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var (
		h                     events.Head
		wg                    sync.WaitGroup
		runErr, cfgErr, idErr error
		first                 events.Strategy
		firstKnown            bool
		firstErr              error
		kv                    = s.postIDs(ctx)
	)
	wg.Go(func() {
		run, err := s.getMsg(ctx, s.threadStream(thread), msgGetRequest{LastFor: s.subj.Thread(thread, events.KindRun)})
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			runErr = unavailable("read the last run event of "+thread, err)
		default:
			env := s.decodeRaw(run)
			h.LastRunSeq = env.Seq
			if s.subj.RunFence {
				env, runErr = s.lastRunEvent(ctx, thread, env)
			}
			if env.Err == nil && env.Event != nil {
				h.ActiveRun = events.RunActiveAfter(env.Event)
			}
		}
	})
	wg.Go(func() { first, firstKnown, firstErr = s.firstPostStrategy(ctx, thread) })
	if kv != nil {
		wg.Go(func() {
			if e, err := kv.Get(ctx, thread); err == nil {
				var c configRecord
				if json.Unmarshal(e.Value(), &c) == nil {
					h.Strategy, h.StrategyKnown = c.Strategy, true
				}
			} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
				cfgErr = unavailable("read the strategy key of "+thread, err)
			}
		})
		if messageID != "" {
			wg.Go(func() {
				if e, err := kv.Get(ctx, thread+"."+messageID); err == nil {
					var r idRecord
					if json.Unmarshal(e.Value(), &r) == nil {
						h.Posted = r.Seq
					}
				} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
					idErr = unavailable("read the message id key of "+thread+"."+messageID, err)
				}
			})
		}
	}
	wg.Wait()
	if err := errors.Join(runErr, cfgErr, idErr); err != nil {
		return h, err
	}
	if h.StrategyKnown {
		return h, nil
	}
	h.Strategy, h.StrategyKnown = first, firstKnown
	return h, firstErr
}

// maxMarkerWalk bounds how many markers in a row lastRunEvent steps over.
const maxMarkerWalk = 1000

// lastRunEvent returns, under RUNFENCE, the last event of the run subject
// that is not a marker, env or before it: a claim or release does not end
// the run before it (its new holder abandons that run), so the head's
// ActiveRun is what the last run event says. Each marker a store wrote
// expects the run subject's sequence before it, so its stored check is the
// step back. A marker with no such check (forged) ends the walk with a zero
// envelope: no active run known.
func (s *Store) lastRunEvent(ctx context.Context, thread string, env events.Envelope) (events.Envelope, error) {
	subject := s.subj.Thread(thread, events.KindRun)
	for range maxMarkerWalk {
		if env.Err != nil || !events.TypeOf(env.Event).Marker() {
			return env, nil
		}
		prev := env.ExpectSeq
		if prev == 0 || prev >= env.Seq || (env.ExpectSubject != "" && env.ExpectSubject != subject) {
			return events.Envelope{}, nil
		}
		m, err := s.getMsg(ctx, s.threadStream(thread), msgGetRequest{Seq: prev})
		if err != nil {
			return events.Envelope{}, unavailable(fmt.Sprintf("read run event %d of %s", prev, thread), err)
		}
		if m.Subject != subject {
			return events.Envelope{}, nil
		}
		env = s.decodeRaw(m)
	}
	return events.Envelope{}, unavailable("read the last run event of "+thread, fmt.Errorf("more than %d markers in a row", maxMarkerWalk))
}

// firstPostStrategy returns the strategy the thread's first posted event
// names when it is a post ("" and known when the thread has none), and
// known false when it is another event (a fork, say).
func (s *Store) firstPostStrategy(ctx context.Context, thread string) (events.Strategy, bool, error) {
	m, err := s.getMsg(ctx, s.threadStream(thread), msgGetRequest{Seq: 1, NextFor: s.subj.Thread(thread, events.KindPosted)})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", true, nil
	}
	if err != nil {
		return "", false, unavailable("read the first post of "+thread, err)
	}
	env := s.decodeRaw(m)
	p := env.Event.GetMessagePosted()
	if env.Err != nil || p == nil {
		return "", false, nil
	}
	st, err := events.ParseStrategy(p.GetStrategy())
	if err != nil {
		return "", true, nil // counts as none (projections.Rules)
	}
	return st, true, nil
}

// recordConfig writes thread's strategy key after its thread_configured
// at seq landed. A failure is logged: posters that name no strategy then
// read the older one until the next configure (the holder follows the log).
func (s *Store) recordConfig(ctx context.Context, ev *eventspb.Event, seq uint64) {
	st, err := events.ParseStrategy(ev.GetThreadConfigured().GetStrategy())
	kv := s.postIDs(ctx)
	if err != nil || st == "" || kv == nil {
		return
	}
	thread := ev.GetThread()
	val, _ := json.Marshal(configRecord{Strategy: st, Seq: seq})
	for range 4 {
		e, err := kv.Get(ctx, thread)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			_, err = kv.Create(ctx, thread, val)
		case err != nil:
		default:
			var c configRecord
			if json.Unmarshal(e.Value(), &c) == nil && c.Seq >= seq {
				return // a newer configure recorded itself
			}
			_, err = kv.Update(ctx, thread, val, e.Revision())
		}
		if err == nil {
			return
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			s.cfg.Logger.Warn("natsstore: could not record a thread's strategy key", "thread", thread, "seq", seq, "err", fmt.Sprint(err))
			return
		}
	}
}
