package memstore

import (
	"context"

	"github.com/artifactr/artifactr/events"
)

var _ events.HeadReader = (*Store)(nil)

// ThreadHead implements [events.HeadReader] as natsstore does: the run
// subject's last event, the newest thread_configured's strategy or else
// the first posted event's, and messageID's post. It scans the thread's
// posted subject for the strategy, which natsstore keeps in a key; the
// answers are the same.
func (s *Store) ThreadHead(ctx context.Context, thread, messageID string) (events.Head, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return events.Head{}, err
	}
	if err := ctx.Err(); err != nil {
		return events.Head{}, err
	}
	l := s.log
	l.mu.Lock()
	runSubj, postSubj := s.cfg.Subjects.Thread(thread, events.KindRun), s.cfg.Subjects.Thread(thread, events.KindPosted)
	var h events.Head
	var run, first, configured *record
	st := l.streamLocked(s.threadKey(thread))
	if seq := st.last[runSubj]; seq != 0 {
		r := st.recs[seq-1]
		run = &r
	}
	if run != nil && s.cfg.Subjects.RunFence {
		// A marker ends no run: the run the last run event before it left
		// active is still active (natsstore walks the markers' checks).
		run = lastRunEvent(st.recs, runSubj)
		h.LastRunSeq = st.last[runSubj]
	}
	for i := range st.recs {
		r := &st.recs[i]
		if r.subject != postSubj {
			continue
		}
		if first == nil {
			first = r
		}
		if r.hdr.Get(events.HeaderType) == string(events.TypeThreadConfigured) {
			configured = r
		}
	}
	if messageID != "" {
		h.Posted = l.postIDs[thread+":"+messageID]
	}
	l.mu.Unlock()
	if run != nil {
		h.LastRunSeq = max(h.LastRunSeq, run.seq)
		if env := s.decode(*run); env.Err == nil {
			h.ActiveRun = events.RunActiveAfter(env.Event)
		}
	}
	h.StrategyKnown = true
	switch {
	case configured != nil:
		if env := s.decode(*configured); env.Err == nil {
			if st, err := events.ParseStrategy(env.Event.GetThreadConfigured().GetStrategy()); err == nil && st != "" {
				h.Strategy = st
				return h, nil
			}
		}
		h.StrategyKnown = false // natsstore records only valid ones
	case first != nil:
		env := s.decode(*first)
		p := env.Event.GetMessagePosted()
		if env.Err != nil || p == nil {
			h.StrategyKnown = false
			break
		}
		h.Strategy, _ = events.ParseStrategy(p.GetStrategy())
	}
	return h, nil
}

// lastRunEvent returns the last record on runSubj that is no marker, nil
// when there is none.
func lastRunEvent(recs []record, runSubj string) *record {
	for i := len(recs) - 1; i >= 0; i-- {
		r := &recs[i]
		if r.subject == runSubj && !events.Type(r.hdr.Get(events.HeaderType)).Marker() {
			c := *r
			return &c
		}
	}
	return nil
}
