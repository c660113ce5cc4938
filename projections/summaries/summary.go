package summaries

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections"
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
	// RunHolder is the holder that started the active run.
	RunHolder string `json:"run_holder,omitempty"`
	// RunCancelSeq is the active run's first cancel request and
	// RunInterruptSeq its run_interrupted, 0 when none.
	RunCancelSeq    uint64 `json:"run_cancel_seq,omitempty"`
	RunInterruptSeq uint64 `json:"run_interrupt_seq,omitempty"`
	// Strategy is the thread's double-texting strategy, "" for enqueue.
	Strategy events.Strategy `json:"strategy,omitempty"`
	// OpenRequests are the active run's requests not yet answered, in the
	// order they were opened; Answered are the ids of those it had answered.
	OpenRequests []Request `json:"open_requests"`
	Answered     []string  `json:"answered,omitempty"`
	// LastRun is the newest run's id and LastRunStatus its state: active,
	// completed, failed or abandoned. "" before the first run.
	LastRun       string `json:"last_run"`
	LastRunStatus string `json:"last_run_status"`

	// Taken is the taken cursor: the end of the consumed prefix (see
	// projections.Thread.Taken). Pending is the number of messages not yet
	// consumed, and PendingSeqs their sequences, oldest first: the thread's
	// backlog. TakenAhead are the messages after the cursor that an event
	// consumed out of order, oldest first: none in a log of honest writers.
	Taken       uint64   `json:"taken"`
	Pending     int      `json:"pending"`
	PendingSeqs []uint64 `json:"pending_seqs"`
	TakenAhead  []uint64 `json:"taken_ahead,omitempty"`

	// ForkedFrom is the thread a thread_forked copied this one's history
	// from, "" when none.
	ForkedFrom string `json:"forked_from,omitempty"`

	Messages  int `json:"messages"`  // messages posted
	Runs      int `json:"runs"`      // runs started
	Anomalies int `json:"anomalies"` // events projections.Thread records as anomalies

	// LastActivity is the stored time of the thread's last event, and
	// LastSeq the last stream sequence applied: the summary is the fold of
	// the thread's events up to it, and Apply skips any envelope at or
	// below it, so a redelivery never applies twice.
	LastActivity time.Time `json:"last_activity"`
	LastSeq      uint64    `json:"last_seq"`

	// Created is the stored time of the thread's first event.
	Created time.Time `json:"created,omitzero"`
	// Metadata is the thread's metadata, merged from its thread_metadata
	// events; DeletedSeq its first thread_deleted, 0 when none.
	Metadata   map[string]json.RawMessage `json:"metadata,omitempty"`
	DeletedSeq uint64                     `json:"deleted_seq,omitempty"`
	// LastRunReason is why the newest run failed or was abandoned, when
	// it ended in this thread (not in a fork's source).
	LastRunReason string `json:"last_run_reason,omitempty"`
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
	s.TakenAhead = slices.Clone(s.TakenAhead)
	s.Metadata = maps.Clone(s.Metadata)
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
	if len(s.TakenAhead) == 0 {
		s.TakenAhead = nil
	}
}

// active reports whether a run is active. A run id may be empty in a
// hand-made log; its start sequence never is.
func (s *Summary) active() bool { return s.RunStartSeq != 0 }

// Unclaimed reports whether the thread has a message pending, no active run
// and no claim (never claimed, or its newest claim released): nobody works
// on it, so a runner must claim it. One that stays so for longer than
// runner.ConsumeBound is stranded.
func (s *Summary) Unclaimed() bool {
	return len(s.PendingSeqs) > 0 && !s.active() && (s.ClaimSeq == 0 || s.Released)
}

// apply folds env into s in place with the fold rules
// ([projections.Step]), as projections.Thread.Apply does.
func (s *Summary) apply(env *events.Envelope) {
	if env.Seq <= s.LastSeq {
		return
	}
	first := s.LastSeq == 0
	s.LastSeq = env.Seq
	projections.Step(summaryFold{s, first}, env)
}

// summaryFold is a Summary as a [projections.State]: bookkeeping only. It
// keeps the active run's requests and the messages after the taken cursor,
// which is all the rules ask of it: a message at or before the cursor is
// refused whatever became of it.
type summaryFold struct {
	s     *Summary
	first bool // env is the first event the summary folds
}

func (f summaryFold) ThreadID() string { return f.s.Thread }

func (f summaryFold) NewestClaim() (uint64, bool) { return f.s.ClaimSeq, f.s.Released }

func (f summaryFold) IsHolder(h string) bool { return f.s.Holder == h }

func (f summaryFold) ClaimHolder() string { return f.s.Holder }

func (f summaryFold) Active() (start, claim uint64, ok bool) {
	return f.s.RunStartSeq, f.s.RunClaimSeq, f.s.active()
}

func (f summaryFold) IsActive(run string) bool { return f.s.active() && f.s.ActiveRun == run }

func (f summaryFold) ActiveID() string { return f.s.ActiveRun }

func (f summaryFold) IsRunHolder(h string) bool { return f.s.active() && f.s.RunHolder == h }

func (f summaryFold) RunHolder() string { return f.s.RunHolder }

// LastRun does not know when the newest run ended: only messages use it.
func (f summaryFold) LastRun() (string, projections.RunStatus, uint64, bool) {
	return f.s.LastRun, projections.RunStatus(f.s.LastRunStatus), 0, f.s.Runs > 0
}

func (f summaryFold) MessageOf(seq uint64) projections.MsgInfo {
	if seq <= f.s.Taken {
		return projections.MsgInfo{Status: projections.MsgTaken}
	}
	i, found := slices.BinarySearch(f.s.PendingSeqs, seq)
	if !found {
		if _, ahead := slices.BinarySearch(f.s.TakenAhead, seq); ahead {
			return projections.MsgInfo{Status: projections.MsgConsumed}
		}
		return projections.MsgInfo{Status: projections.MsgNotPosted}
	}
	return projections.MsgInfo{Status: projections.MsgPending, Oldest: i == 0}
}

// PostedID implements [projections.State]: a summary keeps no message ids,
// so a repost counts as a message here. The stores refuse reposts (an id's
// key), so only a forged post or one from a poster that died between its
// key and its post reaches the log.
func (summaryFold) PostedID(string) (uint64, bool) { return 0, false }

// Reposted implements [projections.State]: never called (see PostedID).
func (summaryFold) Reposted(*events.Envelope, uint64) {}

func (f summaryFold) RequestOf(id string) (projections.ReqInfo, bool) {
	if i := slices.IndexFunc(f.s.OpenRequests, func(q Request) bool { return q.ID == id }); i >= 0 {
		return projections.ReqInfo{Opened: f.s.OpenRequests[i].Seq}, true
	}
	if slices.Contains(f.s.Answered, id) {
		return projections.ReqInfo{Answered: true}, true
	}
	return projections.ReqInfo{}, false
}

func (f summaryFold) Seen(env *events.Envelope, _ events.Kind) {
	f.s.LastActivity = env.Stored.UTC() // JSON keeps the instant, not the zone
	if f.s.Created.IsZero() {
		f.s.Created = f.s.LastActivity
	}
}

func (f summaryFold) Post(env *events.Envelope, _ *eventspb.MessagePosted) {
	f.s.Messages++
	f.s.PendingSeqs = append(f.s.PendingSeqs, env.Seq)
}

func (f summaryFold) Claimed(env *events.Envelope, holder string, _ *eventspb.ThreadClaimed) {
	f.s.Holder, f.s.ClaimSeq, f.s.Released = holder, env.Seq, false
}

func (f summaryFold) Released(*events.Envelope) { f.s.Released = true }

// Consume takes a pending message. Taking the oldest moves the cursor to the
// end of the consumed prefix; taking a newer one out of order keeps it in
// TakenAhead until the older ones are taken.
func (f summaryFold) Consume(_ *events.Envelope, seq uint64, _ projections.ConsumptionKind, _ string) {
	s := f.s
	i, found := slices.BinarySearch(s.PendingSeqs, seq)
	if !found {
		return
	}
	if i > 0 {
		s.PendingSeqs = slices.Delete(s.PendingSeqs, i, i+1)
		j, _ := slices.BinarySearch(s.TakenAhead, seq)
		s.TakenAhead = slices.Insert(s.TakenAhead, j, seq)
		return
	}
	s.Taken, s.PendingSeqs = seq, s.PendingSeqs[1:]
	n := len(s.TakenAhead) // those before the oldest pending join the prefix
	if len(s.PendingSeqs) > 0 {
		n, _ = slices.BinarySearch(s.TakenAhead, s.PendingSeqs[0])
	}
	if n > 0 {
		s.Taken = s.TakenAhead[n-1]
		s.TakenAhead = slices.Delete(s.TakenAhead, 0, n)
	}
}

func (f summaryFold) StartRun(env *events.Envelope, b *eventspb.RunStarted) {
	s := f.s
	s.Runs++
	s.ActiveRun, s.RunStartSeq, s.RunClaimSeq = b.GetRunId(), env.Seq, env.Event.GetClaimSeq()
	s.RunHolder = env.Event.GetHolder()
	s.RunCancelSeq, s.RunInterruptSeq = 0, 0
	s.LastRun, s.LastRunStatus, s.LastRunReason = s.ActiveRun, string(projections.RunActive), ""
	s.OpenRequests, s.Answered = nil, nil
}

func (summaryFold) Output(*events.Envelope, *eventspb.RunOutput) {}

func (f summaryFold) OpenRequest(env *events.Envelope, b *eventspb.RequestOpened) {
	f.s.OpenRequests = append(f.s.OpenRequests, Request{ID: b.GetRequestId(), Question: b.GetQuestion(), Seq: env.Seq})
}

func (f summaryFold) Answered(_ *events.Envelope, b *eventspb.AnswerGiven) {
	s := f.s
	if i := slices.IndexFunc(s.OpenRequests, func(q Request) bool { return q.ID == b.GetRequestId() }); i >= 0 {
		s.Answered = append(s.Answered, s.OpenRequests[i].ID)
		s.OpenRequests = slices.Delete(s.OpenRequests, i, i+1)
	}
}

func (summaryFold) Steered(*events.Envelope, *eventspb.SteeringGiven) {}

func (f summaryFold) EndRun(_ *events.Envelope, status projections.RunStatus, _, reason string) {
	s := f.s
	s.LastRunReason = reason
	s.ActiveRun, s.RunStartSeq, s.RunClaimSeq, s.RunHolder = "", 0, 0, ""
	s.RunCancelSeq, s.RunInterruptSeq = 0, 0
	s.LastRunStatus = string(status)
	s.OpenRequests, s.Answered = nil, nil
}

func (f summaryFold) Anomaly(*events.Envelope, projections.Finding) { f.s.Anomalies++ }

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
		Created:      t.Created.UTC(),
		Metadata:     maps.Clone(t.Metadata),
		DeletedSeq:   t.DeletedSeq,
	}
	if t.Fork != nil {
		s.ForkedFrom = t.Fork.Source
	}
	s.Strategy = t.Strategy
	for _, m := range t.Messages {
		switch {
		case m.Seq <= t.Taken:
		case m.Consumed == nil:
			s.PendingSeqs = append(s.PendingSeqs, m.Seq)
		default:
			s.TakenAhead = append(s.TakenAhead, m.Seq)
		}
	}
	if n := len(t.Runs); n > 0 {
		s.LastRun, s.LastRunStatus = t.Runs[n-1].ID, string(t.Runs[n-1].Status)
		if r := t.Runs[n-1]; r.Status != projections.RunActive && r.StartSeq != 0 {
			s.LastRunReason = r.Reason // a run a fork copied (StartSeq 0) ended elsewhere
		}
	}
	if r := t.ActiveRun; r != nil {
		s.ActiveRun, s.RunStartSeq, s.RunClaimSeq, s.RunHolder = r.ID, r.StartSeq, r.ClaimSeq, r.Holder
		s.RunCancelSeq, s.RunInterruptSeq = r.CancelSeq, r.InterruptSeq
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
