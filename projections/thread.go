package projections

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/artifactr/artifactr/events"
)

// Thread is the state of one thread, folded from its events by [Thread.Apply].
// Every field follows from the log alone: nothing is read from a clock.
type Thread struct {
	ID      string
	LastSeq uint64 // last applied stream sequence

	// Messages are the posted messages in sequence order. They are appended
	// in increasing sequence order, which Apply relies on to find them by
	// binary search.
	Messages []Message
	// Taken is the taken cursor: the end of the consumed prefix, the newest
	// message such that it and every message before it are consumed (0 when
	// the first message is pending). Honest writers consume oldest first,
	// so every message after it is pending. A consuming event that names a
	// newer message (an anomaly) consumes that one alone: the older ones
	// stay pending, and the cursor moves past it only once they are taken.
	Taken uint64
	// next is a hint: the index of the first message after Taken, so that
	// consuming the oldest pending message, the usual case, needs no search.
	next int

	// Claim is the newest claim marker.
	Claim Claim
	// LastClaimSubjectSeq is the last sequence on threads.T.claim: the
	// compare-and-set token of the next thread_claimed or thread_released
	// in the claim layout.
	LastClaimSubjectSeq uint64
	// LastRunSubjectSeq is the last sequence on threads.T.run: the holder's
	// compare-and-set token for its unfenced run-subject appends. In the
	// RUNFENCE layout markers are stored there too, and it is the token of
	// every holder write and claim (K in the spec README's protocol).
	LastRunSubjectSeq uint64
	// LastPostedSubjectSeq is the last sequence on threads.T.posted:
	// messages, and what else is stored there (thread_configured,
	// cancel_requested, malformed events), none of which is work.
	LastPostedSubjectSeq uint64

	ActiveRun *Run   // nil when no run is active; points into Runs
	Runs      []*Run // every run in start order

	Requests map[string]*Request // by request id

	Anomalies []Anomaly

	// Fork is where the thread's history was copied from, when its first
	// event is thread_forked; nil otherwise. See fork.go.
	Fork *Fork

	// LastActivity is the Stored time of the last event of this thread,
	// from the envelope, not from a clock.
	LastActivity time.Time

	// Reposts are the message_posted events whose message id the thread
	// had already, by sequence, each with the message that has the id:
	// none of them is a message (see [Rules]).
	Reposts map[uint64]uint64 `json:",omitempty"`
	// ids finds a posted message by its message id: every message of
	// Messages that was posted here (not copied by a fork), nil when none.
	ids map[string]uint64
	// backed are the ids of ids whose first post the store's index holds
	// (events.FirstPosts): [Thread.Compact] forgets them.
	backed map[string]struct{}
	// Recent are the newest messages' sequences, oldest first, kept by a
	// compact Thread only (at most 2*[RecentWindow]; see [Thread.Compact]).
	Recent []uint64 `json:",omitempty"`
	// compact is the bounded view's state (compact.go); off for a whole fold.
	compact compactState

	env events.Envelope // the envelope Apply folds; zero between calls
	// Strategy is the thread's double-texting strategy: the last
	// thread_configured's, or its first post's; "" means enqueue. See
	// [Thread.StrategyOf].
	Strategy events.Strategy

	// Created is the Stored time of the thread's first event.
	Created time.Time `json:",omitempty"`
	// Metadata is the thread's metadata, merged from its thread_metadata
	// events (nil when none); a value is the JSON the event gave.
	Metadata map[string]json.RawMessage `json:",omitempty"`
	// DeletedSeq is the thread's first thread_deleted, 0 when none: the
	// thread reads as deleted from then on, and its events stay.
	DeletedSeq uint64 `json:",omitempty"`
}

// Message is a posted message.
type Message struct {
	Seq       uint64
	MessageID string
	Author    string
	Text      string
	Posted    time.Time    // the Stored time of its message_posted
	Consumed  *Consumption // nil while pending

	// TraceParent is the W3C trace context its post carried, "" when none.
	TraceParent string
	// Strategy is the strategy its post named, "" for the thread's.
	Strategy events.Strategy `json:",omitempty"`
	// Assistant is the agent its post named, "" for the runner's default.
	Assistant string `json:",omitempty"`
	// Webhook is the URL its post asked to be told of its run's end.
	Webhook string `json:",omitempty"`
}

// ConsumptionKind says how a message was consumed.
type ConsumptionKind string

// The ways a message is consumed.
const (
	ConsumedPrompt   ConsumptionKind = "prompt"   // by run_started
	ConsumedAnswer   ConsumptionKind = "answer"   // by answer_given
	ConsumedSteering ConsumptionKind = "steering" // by steering_given
	ConsumedForked   ConsumptionKind = "forked"   // history copied by thread_forked
)

// Consumption records the event that consumed a message.
type Consumption struct {
	Kind  ConsumptionKind
	RunID string
	Seq   uint64 // the consuming event's sequence
}

// Claim is a claim marker: a thread_claimed event and whether it was released.
type Claim struct {
	Holder        string
	Seq           uint64 // claim_seq: the marker's sequence, the fencing token
	LeaseRevision uint64
	Released      bool
}

// RunStatus is the state of a run.
type RunStatus string

// The run states. A run is active from run_started until one of the others.
const (
	RunActive    RunStatus = "active"
	RunCompleted RunStatus = "completed"
	RunFailed    RunStatus = "failed"
	RunAbandoned RunStatus = "abandoned"
)

// Run is one agent turn.
type Run struct {
	ID        string
	PromptSeq uint64 // the message its run_started consumed
	StartSeq  uint64 // its run_started
	ClaimSeq  uint64 // the claim it started under
	EndSeq    uint64 // its end; 0 while active
	Holder    string
	Agent     string
	Status    RunStatus
	Outputs   []string // run_output texts in order
	Output    string   // run_completed's output
	Reason    string   // run_failed's or run_abandoned's reason
	Steering  []uint64 // sequences of the messages given as steering
	Requests  []string // ids of the requests it opened, in order

	// PromptPosted and PromptTraceParent are its prompt's Posted time and
	// trace context, kept on the run: a compact view forgets the prompt
	// once it is consumed, and a turn's metrics and span still need them.
	PromptPosted      time.Time `json:",omitzero"`
	PromptTraceParent string    `json:",omitempty"`

	// CancelSeq is the first cancel_requested that named it while it was
	// active; 0 when none.
	CancelSeq uint64 `json:",omitempty"`
	// InterruptSeq is its run_interrupted, InterruptedBy the post that
	// interrupted it, and RolledBack whether that post rolls it back: it
	// is then left out of the history later runs are given.
	InterruptSeq  uint64 `json:",omitempty"`
	InterruptedBy uint64 `json:",omitempty"`
	RolledBack    bool   `json:",omitempty"`
}

// Request is a question a run asked.
type Request struct {
	ID         string
	RunID      string
	Question   string
	OpenedSeq  uint64
	Answered   bool
	AnswerSeq  uint64 // the answer_given
	MessageSeq uint64 // the message that answered it
	Closed     bool   // its run ended
}

// Anomaly is an event that Apply could not apply as it stands: malformed,
// of another thread, or contradicting the state. The state follows the log
// where it can; each Reason says what was wrong, in one sentence.
type Anomaly struct {
	Seq    uint64
	Type   events.Type
	Reason string
}

// New returns the empty state of thread id.
func New(id string) *Thread {
	return &Thread{ID: id, Requests: make(map[string]*Request)}
}

// Fold applies envs in order to the empty state of thread id.
func Fold(id string, envs []events.Envelope) *Thread {
	t := New(id)
	for i := range envs {
		t.Apply(envs[i])
	}
	return t
}

// Clone returns a deep copy of t: applying events to one leaves the other
// unchanged.
func (t *Thread) Clone() *Thread {
	c := *t
	c.Messages = slices.Clone(t.Messages)
	n := 0
	for i := range c.Messages {
		if c.Messages[i].Consumed != nil {
			n++
		}
	}
	slab := make([]Consumption, 0, n) // one allocation for every consumption
	for i := range c.Messages {
		if p := c.Messages[i].Consumed; p != nil {
			slab = append(slab, *p)
			c.Messages[i].Consumed = &slab[len(slab)-1]
		}
	}
	c.Runs = nil
	c.ActiveRun = nil
	if t.Runs != nil {
		c.Runs = make([]*Run, len(t.Runs))
		for i, r := range t.Runs {
			c.Runs[i] = r.clone()
			if r == t.ActiveRun {
				c.ActiveRun = c.Runs[i]
			}
		}
	}
	if t.ActiveRun != nil && c.ActiveRun == nil {
		c.ActiveRun = t.ActiveRun.clone() // not in Runs: only a hand-made state
	}
	if t.Requests != nil {
		c.Requests = make(map[string]*Request, len(t.Requests))
		for id, q := range t.Requests {
			cq := *q
			c.Requests[id] = &cq
		}
	}
	c.Anomalies = slices.Clone(t.Anomalies)
	c.Metadata = maps.Clone(t.Metadata)
	c.Reposts = maps.Clone(t.Reposts)
	c.ids = maps.Clone(t.ids)
	c.backed = maps.Clone(t.backed)
	c.Recent = slices.Clone(t.Recent)
	c.compact.ids = t.compact.ids.clone()
	return &c
}

// indexIDs rebuilds ids from Messages, after they were set wholesale.
func (t *Thread) indexIDs() {
	t.ids = nil
	for _, m := range t.Messages {
		if m.MessageID != "" && (m.Consumed == nil || m.Consumed.Kind != ConsumedForked) {
			t.indexID(m.MessageID, m.Seq)
		}
	}
}

// indexed records that the store's index holds id's first post.
func (t *Thread) indexed(id string) {
	if t.backed == nil {
		t.backed = make(map[string]struct{})
	}
	t.backed[id] = struct{}{}
}

func (t *Thread) indexID(id string, seq uint64) {
	if t.ids == nil {
		t.ids = make(map[string]uint64)
	}
	if _, ok := t.ids[id]; !ok {
		t.ids[id] = seq
	}
}

// MessageByID returns the message posted in t with message id id.
// A compact Thread finds only its pending messages.
func (t *Thread) MessageByID(id string) (Message, bool) {
	if t.compact.on {
		for _, m := range t.Messages {
			if m.MessageID == id {
				return m, true
			}
		}
		return Message{}, false
	}
	seq, ok := t.ids[id]
	if !ok {
		return Message{}, false
	}
	i, ok := t.messageIndex(seq)
	if !ok {
		return Message{}, false
	}
	return t.Messages[i], true
}

// Reply is what the run answered, by the one rule that post --wait, show,
// the agents' conversations and the HTTP API share: run_completed's output
// when it is not empty, else the run's run_output texts joined with no
// separator. For a run that did not complete it is the outputs joined,
// what the run said before it ended.
func (r *Run) Reply() string {
	if r.Output != "" {
		return r.Output
	}
	return strings.Join(r.Outputs, "")
}

func (r *Run) clone() *Run {
	c := *r
	c.Outputs = slices.Clone(r.Outputs)
	c.Steering = slices.Clone(r.Steering)
	c.Requests = slices.Clone(r.Requests)
	return &c
}

// Pending returns a copy of the messages not yet consumed, oldest first:
// those after the taken cursor, but for any that an event consumed out of
// order.
func (t *Thread) Pending() []Message {
	var out []Message
	for _, m := range t.Messages[t.pendingIndex():] {
		if m.Consumed == nil {
			out = append(out, m)
		}
	}
	return out
}

// OldestPending returns the oldest message not yet consumed, the first
// after the taken cursor: the next prompt, answer or steering.
func (t *Thread) OldestPending() (Message, bool) {
	i := t.pendingIndex()
	if i == len(t.Messages) {
		return Message{}, false
	}
	return t.Messages[i], true
}

// OpenRequests returns the active run's requests that are neither answered
// nor closed, in the order they were opened.
func (t *Thread) OpenRequests() []*Request {
	if t.ActiveRun == nil {
		return nil
	}
	var open []*Request
	for _, id := range t.ActiveRun.Requests {
		if q := t.Requests[id]; q != nil && !q.Answered && !q.Closed {
			open = append(open, q)
		}
	}
	return open
}

// pendingIndex returns the index of the first message after Taken.
func (t *Thread) pendingIndex() int {
	if n := t.next; n <= len(t.Messages) &&
		(n == len(t.Messages) || t.Messages[n].Seq > t.Taken) &&
		(n == 0 || t.Messages[n-1].Seq <= t.Taken) {
		return n
	}
	i, found := slices.BinarySearchFunc(t.Messages, t.Taken, cmpSeq)
	if found {
		i++
	}
	return i
}

// messageIndex returns the index of the message with sequence seq.
func (t *Thread) messageIndex(seq uint64) (int, bool) {
	if n := t.next; n < len(t.Messages) && t.Messages[n].Seq == seq {
		return n, true
	}
	return slices.BinarySearchFunc(t.Messages, seq, cmpSeq)
}

func cmpSeq(m Message, seq uint64) int {
	switch {
	case m.Seq < seq:
		return -1
	case m.Seq > seq:
		return 1
	}
	return 0
}
