package summaries

import (
	"fmt"
	"slices"
	"time"

	"artifactr/events"
	"artifactr/events/eventspb"
	"artifactr/projections"
)

// Status is what a thread is doing.
type Status string

// The statuses.
const (
	StatusIdle    Status = "idle"    // no run is active
	StatusActive  Status = "active"  // a run is active
	StatusWaiting Status = "waiting" // the active run waits for an answer to a request
)

// Summary is the small, stored state of one thread: what `artifactr threads`
// shows, and what any NATS client reads from the bucket as JSON. It is
// folded from the thread's envelopes by [Apply] and agrees with
// [projections.Thread] on every field (see [FromThread]), but keeps only
// what it needs: no texts, no history of runs. Its size grows only with the
// thread's backlog (PendingSeqs) and the active run's requests.
//
// One difference, on logs no correct writer makes: projections.Thread
// refuses a request id any earlier run of the thread used, and a summary,
// which forgets ended runs, refuses only one the active run used.
//
// The JSON field names are stable and only ever added.
type Summary struct {
	Thread string `json:"thread"`
	Status Status `json:"status"`

	// Holder is the newest claim's holder, ClaimSeq its marker's sequence
	// (the fencing token) and Released whether it was released. Holder is
	// "" when the thread was never claimed.
	Holder   string `json:"holder"`
	ClaimSeq uint64 `json:"claim_seq"`
	Released bool   `json:"released"`

	// ActiveRun is the active run's id, "" when none; RunStartSeq is its
	// run_started and RunClaimSeq the claim it started under.
	ActiveRun   string `json:"active_run"`
	RunStartSeq uint64 `json:"run_start_seq,omitempty"`
	RunClaimSeq uint64 `json:"run_claim_seq,omitempty"`
	// OpenRequests are the active run's requests not yet answered, in the
	// order they were opened; Answered are the ids of those it had answered.
	OpenRequests []Request `json:"open_requests"`
	Answered     []string  `json:"answered,omitempty"`
	// LastRun is the newest run's id and LastRunStatus its state: active,
	// completed, failed or abandoned. "" before the first run.
	LastRun       string `json:"last_run"`
	LastRunStatus string `json:"last_run_status"`

	// Taken is the taken cursor: the newest consumed message. Pending is
	// the number of messages after it, and PendingSeqs their sequences,
	// oldest first: the thread's backlog.
	Taken       uint64   `json:"taken"`
	Pending     int      `json:"pending"`
	PendingSeqs []uint64 `json:"pending_seqs"`

	Messages  int `json:"messages"`  // messages posted
	Runs      int `json:"runs"`      // runs started
	Anomalies int `json:"anomalies"` // events projections.Thread records as anomalies

	// LastActivity is the stored time of the thread's last event, and
	// LastSeq the last stream sequence applied: the summary is the fold of
	// the thread's events up to it, and Apply skips any envelope at or
	// below it, so a redelivery never applies twice.
	LastActivity time.Time `json:"last_activity"`
	LastSeq      uint64    `json:"last_seq"`
}

// Request is an open request of the active run.
type Request struct {
	ID       string `json:"id"`
	Question string `json:"question"`
	Seq      uint64 `json:"seq"` // its request_opened
}

// Empty returns the summary of a thread with no events.
func Empty(thread string) Summary {
	return Summary{Thread: thread, Status: StatusIdle}
}

// Fold applies envs in order to the empty summary of thread.
func Fold(thread string, envs []events.Envelope) Summary {
	s := Empty(thread)
	for i := range envs {
		s.apply(&envs[i])
	}
	s.normalize()
	return s
}

// Apply returns s with env applied. It is pure and total, like
// projections.Thread.Apply: it does no I/O, reads no clock, leaves s
// unchanged (its slices are copied before they change), and turns a
// malformed or contradictory event into a counted anomaly, never a panic.
// An envelope whose Seq is not after s.LastSeq was applied already and
// returns s as it is. An envelope of another thread is counted as an
// anomaly, as projections.Thread does.
func Apply(s Summary, env events.Envelope) Summary {
	if env.Seq <= s.LastSeq {
		return s
	}
	c := s.Clone()
	c.apply(&env)
	c.normalize()
	return c
}

// Clone returns a deep copy of s.
func (s Summary) Clone() Summary {
	s.OpenRequests = slices.Clone(s.OpenRequests)
	s.Answered = slices.Clone(s.Answered)
	s.PendingSeqs = slices.Clone(s.PendingSeqs)
	return s
}

// normalize sets the derived fields, and makes empty lists empty rather
// than nil, so that a summary encodes the same whatever its history.
func (s *Summary) normalize() {
	s.Pending = len(s.PendingSeqs)
	switch {
	case !s.active():
		s.Status = StatusIdle
	case len(s.OpenRequests) > 0:
		s.Status = StatusWaiting
	default:
		s.Status = StatusActive
	}
	if s.OpenRequests == nil {
		s.OpenRequests = []Request{}
	}
	if s.PendingSeqs == nil {
		s.PendingSeqs = []uint64{}
	}
	if len(s.Answered) == 0 {
		s.Answered = nil
	}
}

// active reports whether a run is active. A run id may be empty in a
// hand-made log; its start sequence never is.
func (s *Summary) active() bool { return s.RunStartSeq != 0 }

// apply folds env into s in place, mirroring projections.Thread.Apply case
// by case for the fields a summary keeps (see its doc for the rules).
func (s *Summary) apply(env *events.Envelope) {
	if env.Seq <= s.LastSeq {
		return
	}
	s.LastSeq = env.Seq
	if env.Thread != s.Thread {
		s.Anomalies++
		return
	}
	s.LastActivity = env.Stored.UTC() // JSON keeps the instant, not the zone
	ev := env.Event
	typ := events.TypeOf(ev)
	if malformed(env, typ, s.Thread) {
		s.Anomalies++
		return
	}
	switch b := ev.GetBody().(type) {
	case *eventspb.Event_MessagePosted:
		s.Messages++
		s.PendingSeqs = append(s.PendingSeqs, env.Seq)
	case *eventspb.Event_ThreadClaimed:
		holder := b.ThreadClaimed.GetHolder()
		if holder == "" {
			holder = ev.GetHolder()
		}
		s.Holder, s.ClaimSeq, s.Released = holder, env.Seq, false
	case *eventspb.Event_ThreadReleased:
		cs := ev.GetClaimSeq()
		if s.ClaimSeq == 0 || cs != s.ClaimSeq || s.Released || ev.GetHolder() != s.Holder {
			s.Anomalies++
			return
		}
		s.Released = true
	case *eventspb.Event_RunStarted:
		if s.active() {
			s.Anomalies++ // I3
		}
		s.consume(b.RunStarted.GetPromptSeq())
		s.Runs++
		s.ActiveRun, s.RunStartSeq, s.RunClaimSeq = b.RunStarted.GetRunId(), env.Seq, ev.GetClaimSeq()
		s.LastRun, s.LastRunStatus = s.ActiveRun, string(projections.RunActive)
		s.OpenRequests, s.Answered = nil, nil
	case *eventspb.Event_RunOutput:
		s.checkActive(b.RunOutput.GetRunId())
	case *eventspb.Event_RequestOpened:
		s.openRequest(env, b.RequestOpened)
	case *eventspb.Event_AnswerGiven:
		s.answer(b.AnswerGiven)
	case *eventspb.Event_SteeringGiven:
		s.checkActive(b.SteeringGiven.GetRunId())
		s.consume(b.SteeringGiven.GetMessageSeq())
	case *eventspb.Event_RunCompleted:
		if s.checkActive(b.RunCompleted.GetRunId()) {
			s.endRun(projections.RunCompleted)
		}
	case *eventspb.Event_RunFailed:
		if s.checkActive(b.RunFailed.GetRunId()) {
			s.endRun(projections.RunFailed)
		}
	case *eventspb.Event_RunAbandoned:
		s.abandon(b.RunAbandoned)
	case *eventspb.Event_ThreadConfigured, *eventspb.Event_CancelRequested, *eventspb.Event_RunInterrupted:
		s.applyStrategy(env) // strategy.go
	}
	if b, ok := ev.GetBody().(*eventspb.Event_MessagePosted); ok {
		s.postStrategy(b.MessagePosted) // strategy.go
	}
}

// malformed mirrors projections.Thread's check of an envelope it cannot
// apply as an event of thread.
func malformed(env *events.Envelope, typ events.Type, thread string) bool {
	return env.Err != nil || typ == "" || env.Event.GetThread() != thread ||
		(env.Type != "" && env.Type != typ) || (env.Kind != "" && env.Kind != typ.Kind())
}

// checkActive reports whether run is the active run, counting an anomaly
// when it is not.
func (s *Summary) checkActive(run string) bool {
	if s.active() && s.ActiveRun == run {
		return true
	}
	s.Anomalies++
	return false
}

func (s *Summary) openRequest(env *events.Envelope, b *eventspb.RequestOpened) {
	if !s.checkActive(b.GetRunId()) {
		return
	}
	id := b.GetRequestId()
	if s.hasRequest(id) {
		s.Anomalies++
		return
	}
	s.OpenRequests = append(s.OpenRequests, Request{ID: id, Question: b.GetQuestion(), Seq: env.Seq})
}

// hasRequest reports whether the active run opened request id.
func (s *Summary) hasRequest(id string) bool {
	return slices.ContainsFunc(s.OpenRequests, func(q Request) bool { return q.ID == id }) || slices.Contains(s.Answered, id)
}

// answer consumes the answer's message in any case, like
// projections.Thread, and closes the request only when it is an open
// request of the active run.
func (s *Summary) answer(b *eventspb.AnswerGiven) {
	i := slices.IndexFunc(s.OpenRequests, func(q Request) bool { return q.ID == b.GetRequestId() })
	if s.active() && s.ActiveRun == b.GetRunId() && i >= 0 {
		s.Answered = append(s.Answered, s.OpenRequests[i].ID)
		s.OpenRequests = slices.Delete(s.OpenRequests, i, i+1)
	} else {
		s.Anomalies++
	}
	s.consume(b.GetMessageSeq())
}

// abandon ends the active run. The abandon of a run that already ended on
// its own (its holder recorded the end first) changes nothing.
func (s *Summary) abandon(b *eventspb.RunAbandoned) {
	ended := s.LastRunStatus == string(projections.RunCompleted) || s.LastRunStatus == string(projections.RunFailed)
	if !s.active() && s.LastRun == b.GetRunId() && ended {
		return
	}
	if !s.checkActive(b.GetRunId()) {
		return
	}
	if b.GetStartedClaimSeq() != s.RunClaimSeq {
		s.Anomalies++
	}
	s.endRun(projections.RunAbandoned)
}

func (s *Summary) endRun(status projections.RunStatus) {
	s.ActiveRun, s.RunStartSeq, s.RunClaimSeq = "", 0, 0
	s.LastRunStatus = string(status)
	s.OpenRequests, s.Answered = nil, nil
}

// consume takes message seq, as projections.Thread's consume does: a
// message after the taken cursor moves it there (a message skipped on the
// way is no longer pending, and taking one that is not the oldest is an
// anomaly); a message at or before the cursor, or one never posted, is an
// anomaly and changes nothing a summary keeps.
func (s *Summary) consume(seq uint64) {
	if seq <= s.Taken {
		s.Anomalies++
		return
	}
	i, found := slices.BinarySearch(s.PendingSeqs, seq)
	if !found {
		s.Anomalies++ // not posted in this thread
		return
	}
	if i != 0 {
		s.Anomalies++ // not the oldest pending message
	}
	s.Taken = seq
	s.PendingSeqs = s.PendingSeqs[i+1:]
}

// FromThread summarises a full fold. Folding a thread's envelopes with
// [Apply] gives the same summary, which the tests check on random logs; the
// CLI uses it where it has folded a thread anyway.
func FromThread(t *projections.Thread) Summary {
	s := Summary{
		Thread:       t.ID,
		Holder:       t.Claim.Holder,
		ClaimSeq:     t.Claim.Seq,
		Released:     t.Claim.Released,
		Taken:        t.Taken,
		Messages:     len(t.Messages),
		Runs:         len(t.Runs),
		Anomalies:    len(t.Anomalies),
		LastActivity: t.LastActivity.UTC(),
		LastSeq:      t.LastSeq,
	}
	for _, m := range t.Pending() {
		s.PendingSeqs = append(s.PendingSeqs, m.Seq)
	}
	if n := len(t.Runs); n > 0 {
		s.LastRun, s.LastRunStatus = t.Runs[n-1].ID, string(t.Runs[n-1].Status)
	}
	if r := t.ActiveRun; r != nil {
		s.ActiveRun, s.RunStartSeq, s.RunClaimSeq = r.ID, r.StartSeq, r.ClaimSeq
		for _, id := range r.Requests {
			switch q := t.Requests[id]; {
			case q == nil:
			case q.Answered:
				s.Answered = append(s.Answered, id)
			default:
				s.OpenRequests = append(s.OpenRequests, Request{ID: id, Question: q.Question, Seq: q.OpenedSeq})
			}
		}
	}
	s.normalize()
	return s
}

// String is a one-line description, for logs.
func (s Summary) String() string {
	return fmt.Sprintf("%s %s holder=%q claim=%d run=%q pending=%d last=%d", s.Thread, s.Status, s.Holder, s.ClaimSeq, s.ActiveRun, s.Pending, s.LastSeq)
}
