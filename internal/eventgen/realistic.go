package eventgen

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// Realistic makes a clean, realistic log, as `artifactr bench audit` publishes it: well-behaved
// holders across many threads, interleaved at random. Turns post a prompt,
// start a run fenced by the claim, emit outputs, sometimes ask a request
// that a later post answers, sometimes take steering, and complete or fail;
// claims are released when idle, and some runs are abandoned by a takeover.
// Every event carries the headers a real append does, with the sequences
// JetStream will assign, as it stores one publisher's messages in order.
type Realistic struct {
	rng     *rand.Rand
	q       Seqs
	threads []*genThread
	pad     string // filler for texts, to reach realistic event sizes
}

// genThread is one thread's writer state.
type genThread struct {
	id        string
	holder    string
	claimSeq  uint64 // 0 when not claimed
	holders   int
	lastClaim uint64 // last sequence on the claim subject
	lastRun   uint64 // last sequence on the run subject
	pending   []uint64
	posts     int
	runs      int
	run       string  // active run; "" when none
	runClaim  uint64  // the claim the active run started under
	plan      []genOp // the active run's remaining steps
	request   string  // the open request, "" when none
}

type genOp int

// A run's steps. Each emits one event, so sequences are assigned in the
// order events are published.
const (
	opOutput     genOp = iota
	opAsk              // request_opened
	opAnswerPost       // the post that answers it
	opAnswer           // answer_given consuming that post
	opSteerPost        // a post made while the run is active
	opSteer            // steering_given consuming it
	opTakeover         // another holder's thread_claimed
	opAbandon          // its run_abandoned of the active run
	opComplete
	opFail
)

// NewRealistic returns the realistic log of seed across threads threads
// (at least 1), on the default subject prefix.
func NewRealistic(seed uint64, threads int) *Realistic {
	g := &Realistic{
		rng: rand.New(rand.NewPCG(seed, 0x5eed)),
		pad: strings.Repeat("lorem ipsum dolor sit amet, consectetur adipiscing elit; ", 6),
	}
	threads = max(threads, 1)
	for i := range threads {
		g.threads = append(g.threads, &genThread{id: fmt.Sprintf("bench-%05d", i)})
	}
	return g
}

// Next returns the next message of the log, with the next sequence.
func (g *Realistic) Next() Msg {
	t := g.threads[g.rng.IntN(len(g.threads))]
	switch {
	case t.claimSeq == 0:
		return g.claim(t)
	case t.run == "" && len(t.pending) == 0:
		if t.posts > 0 && g.rng.IntN(8) == 0 {
			return g.release(t)
		}
		out, _ := g.post(t, "prompt")
		return out
	case t.run == "":
		return g.start(t)
	}
	return g.runStep(t)
}

func (g *Realistic) text(kind string, n int) string {
	return kind + " " + g.pad[:min(n, len(g.pad))]
}

// emit encodes ev with the headers of chk at the next sequence.
func (g *Realistic) emit(t *genThread, ev *eventspb.Event, chk events.Check, msgID string) Msg {
	m := g.q.Next(ev, chk, msgID)
	switch events.TypeOf(ev).Kind() {
	case events.KindClaim:
		t.lastClaim = m.Seq
	case events.KindRun:
		t.lastRun = m.Seq
	}
	return m
}

func (g *Realistic) held(t *genThread) *eventspb.Event {
	return &eventspb.Event{Thread: t.id, ClaimSeq: t.claimSeq, Holder: t.holder}
}

func (g *Realistic) claim(t *genThread) Msg {
	t.holders++
	t.holder = fmt.Sprintf("runner-%d-%04x/%012x", t.holders%3, g.rng.Uint32()&0xffff, g.rng.Uint64()&0xffffffffffff)
	ev := &eventspb.Event{Thread: t.id, Holder: t.holder, Body: &eventspb.Event_ThreadClaimed{
		ThreadClaimed: &eventspb.ThreadClaimed{Holder: t.holder, LeaseRevision: g.q.Seq + 1, LeaseTtlMs: 10_000}}}
	out := g.emit(t, ev, events.ExpectLast(t.lastClaim), "")
	t.claimSeq = g.q.Seq
	return out
}

func (g *Realistic) release(t *genThread) Msg {
	ev := g.held(t)
	ev.Body = &eventspb.Event_ThreadReleased{ThreadReleased: &eventspb.ThreadReleased{Holder: t.holder, Reason: "idle"}}
	out := g.emit(t, ev, events.ExpectLast(t.lastClaim), "")
	t.claimSeq, t.holder = 0, ""
	return out
}

func (g *Realistic) post(t *genThread, kind string) (Msg, uint64) {
	t.posts++
	id := fmt.Sprintf("m-%06d", t.posts)
	ev := &eventspb.Event{Thread: t.id, Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{
		MessageId: id, Author: "person@example.com", Text: g.text(kind, 120+g.rng.IntN(120))}}}
	out := g.emit(t, ev, events.Check{}, t.id+":"+id)
	t.pending = append(t.pending, g.q.Seq)
	return out, g.q.Seq
}

// consume takes the oldest pending message.
func (t *genThread) consume() uint64 {
	m := t.pending[0]
	t.pending = t.pending[1:]
	return m
}

func (g *Realistic) start(t *genThread) Msg {
	t.runs++
	t.run = fmt.Sprintf("run-%s-%05d", t.id, t.runs)
	t.runClaim = t.claimSeq
	ev := g.held(t)
	ev.Body = &eventspb.Event_RunStarted{RunStarted: &eventspb.RunStarted{RunId: t.run, PromptSeq: t.consume(), Agent: "echo"}}
	out := g.emit(t, ev, events.Check{Mode: events.CheckFence, Seq: t.claimSeq}, "")
	t.plan = t.plan[:0]
	for range 1 + g.rng.IntN(2) {
		t.plan = append(t.plan, opOutput)
	}
	switch r := g.rng.IntN(20); {
	case r < 4:
		t.plan = append(t.plan, opAsk, opAnswerPost, opAnswer, opOutput)
	case r < 6:
		t.plan = append(t.plan, opSteerPost, opSteer, opOutput)
	case r < 7:
		t.plan = append(t.plan, opTakeover, opAbandon)
		return out
	}
	if g.rng.IntN(25) == 0 {
		t.plan = append(t.plan, opFail)
	} else {
		t.plan = append(t.plan, opComplete)
	}
	return out
}

func (g *Realistic) runStep(t *genThread) Msg {
	op := t.plan[0]
	t.plan = t.plan[1:]
	ev := g.held(t)
	fenced := events.Check{Mode: events.CheckFence, Seq: t.claimSeq}
	switch op {
	case opOutput:
		ev.Body = &eventspb.Event_RunOutput{RunOutput: &eventspb.RunOutput{RunId: t.run, Text: g.text("output", 150+g.rng.IntN(100))}}
		return g.emit(t, ev, events.ExpectLast(t.lastRun), "")
	case opAsk:
		t.request = t.run + "-q1"
		ev.Body = &eventspb.Event_RequestOpened{RequestOpened: &eventspb.RequestOpened{RunId: t.run, RequestId: t.request, Question: g.text("which one?", 60)}}
		return g.emit(t, ev, events.ExpectLast(t.lastRun), "")
	case opAnswerPost, opSteerPost:
		out, _ := g.post(t, "reply")
		return out
	case opAnswer:
		ev.Body = &eventspb.Event_AnswerGiven{AnswerGiven: &eventspb.AnswerGiven{RunId: t.run, RequestId: t.request, MessageSeq: t.consume()}}
		t.request = ""
		return g.emit(t, ev, fenced, "")
	case opSteer:
		ev.Body = &eventspb.Event_SteeringGiven{SteeringGiven: &eventspb.SteeringGiven{RunId: t.run, MessageSeq: t.consume()}}
		return g.emit(t, ev, fenced, "")
	case opTakeover: // another runner claims the thread while the run is active
		return g.claim(t)
	case opAbandon: // and abandons the run, fenced by its own claim
		ev.Body = &eventspb.Event_RunAbandoned{RunAbandoned: &eventspb.RunAbandoned{RunId: t.run, StartedClaimSeq: t.runClaim, Reason: "lease lapsed; taken over"}}
		t.run = ""
		return g.emit(t, ev, fenced, "")
	case opFail:
		ev.Body = &eventspb.Event_RunFailed{RunFailed: &eventspb.RunFailed{RunId: t.run, Reason: "agent error: exit status 1"}}
		t.run = ""
		return g.emit(t, ev, events.ExpectLast(t.lastRun), "")
	}
	ev.Body = &eventspb.Event_RunCompleted{RunCompleted: &eventspb.RunCompleted{RunId: t.run, Output: g.text("echo:", 150+g.rng.IntN(100))}}
	t.run = ""
	return g.emit(t, ev, events.ExpectLast(t.lastRun), "")
}
