package httpapi

import (
	"context"
	"encoding/json"
	"time"

	"github.com/artifactr/artifactr/client"
)

// delayedRescan is how often the drainer reads the whole delayed-post
// bucket when nothing is due sooner: it finds there the posts it was not
// told of, those of another serve that stopped before their time. Its own
// it posts on time.
const delayedRescan = 10 * time.Second

// delayedMeta is what the API keeps with a delayed post for its run JSON.
type delayedMeta struct {
	Assistant string `json:"assistant_id"`
	Strategy  string `json:"multitask_strategy"`
}

// schedule stores p's posts in the delayed-post bucket, to be made after
// p.after by whichever serve drains the bucket first, and wakes this
// server's drainer. The run is acknowledged only once the key is stored,
// so a serve that stops before the delay is over loses nothing: the next
// one to drain the bucket makes the post. A retried create of the same run
// returns the stored one.
func (s *Server) schedule(ctx context.Context, p *runPlan, strategy string, now time.Time) (client.Delayed, error) {
	meta, err := json.Marshal(delayedMeta{Assistant: p.assistant.ID(), Strategy: p.strategy})
	if err != nil {
		return client.Delayed{}, err
	}
	d, _, err := s.c.PostLater(ctx, s.cfg.DelayedBucket, client.Delayed{
		Thread: p.thread, Run: p.runID(), Created: now.UTC(), Due: now.Add(p.after).UTC(),
		Messages: s.messages(p, strategy), Meta: meta,
	})
	if err != nil {
		return client.Delayed{}, err
	}
	select {
	case s.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
	return d, nil
}

// delayedJSON is the Run of a delayed post whose message is not in the
// thread (yet): pending, or error when it was refused at its time (a
// reject post that found a run active), or interrupted when cancelled.
func (s *Server) delayedJSON(d client.Delayed) runJSON {
	var meta delayedMeta
	_ = json.Unmarshal(d.Meta, &meta)
	status := "pending"
	switch {
	case d.Failed == client.Cancelled:
		status = "interrupted"
	case d.Failed != "":
		status = "error"
	}
	st := meta.Strategy
	return runJSON{RunID: d.Run, ThreadID: d.Thread, AssistantID: meta.Assistant, CreatedAt: isoTime(d.Created),
		UpdatedAt: isoTime(d.Created), Status: status, Metadata: map[string]any{}, MultitaskStrategy: &st, Kwargs: map[string]any{}}
}

// drainDelayed posts the delayed runs when they are due: at once on start
// (those whose serve stopped first), then at the earliest due time it
// knows, when a run is scheduled, and every delayedRescan.
func (s *Server) drainDelayed() {
	defer s.wg.Done()
	var wait time.Duration
	for {
		t := time.NewTimer(wait)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-s.wake:
			t.Stop()
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
		next, done, err := s.c.PostDue(ctx, s.cfg.DelayedBucket, s.cfg.Now())
		cancel()
		for _, d := range done {
			if d.Failed != "" && d.Failed != client.Cancelled {
				s.log.Warn("a delayed run's post was refused at its time", "thread", d.Thread, "run", d.Run, "reason", d.Failed)
			}
		}
		wait = delayedRescan
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			s.log.Warn("posting delayed runs failed; trying again", "err", err, "in", delayedRescan)
		}
		if !next.IsZero() {
			wait = max(0, min(wait, next.Sub(s.cfg.Now())))
		}
	}
}

// isStatus reports whether err is answered with status code.
func isStatus(err error, code int) bool { return statusOf(err) == code }
