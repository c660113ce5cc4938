package sim

import (
	"errors"
	"fmt"

	"github.com/artifactr/artifactr/actors/thread"
	"github.com/artifactr/artifactr/projections"
)

// decide feeds in to p's core and carries out the Ready, as the actor shell
// does. It returns false when the core refused the input.
func (w *world) decide(p *proc, in thread.Input) bool {
	rd, err := p.core.Decide(in)
	var rej *thread.RejectError
	switch {
	case errors.As(err, &rej) && isRunReport(in):
		// A run the core no longer holds (its view saw it end or be
		// abandoned) reports late; the shell drops it.
		w.tracef("%s %s -> rejected: %s%s", p.holder, describeInput(in), rej.Reason, describeReady(rd))
		w.carry(p, rd)
		return false
	case err != nil:
		w.fail(CheckDecide, fmt.Sprintf("%s: Decide(%s): %v", p.holder, describeInput(in), err))
		return false
	}
	w.tracef("%s %s%s", p.holder, describeInput(in), describeReady(rd))
	w.carry(p, rd)
	return true
}

func isRunReport(in thread.Input) bool {
	switch in.(type) {
	case thread.RunOutput, thread.RunAsked, thread.RunSteer, thread.RunFinished:
		return true
	}
	return false
}

// carry carries out rd's local parts at once and queues its I/O: the
// append, the sync and the release wait in p.out for a later step.
func (w *world) carry(p *proc, rd thread.Ready) {
	for _, id := range rd.Cancel {
		for _, r := range p.runs {
			if r.id == id {
				r.cancelled = true
			}
		}
	}
	for _, s := range rd.Start {
		w.res.Stats.Runs++
		w.handOut(p, s.RunID, s.Prompt.Seq, projections.ConsumedPrompt)
		p.runs = append(p.runs, &run{id: s.RunID})
	}
	for _, d := range rd.Deliver {
		kind := projections.ConsumedSteering
		if d.RequestID != "" {
			kind = projections.ConsumedAnswer
		} else {
			w.res.Stats.Steered++
		}
		w.handOut(p, d.RunID, d.Message.Seq, kind)
	}
	if rd.Append != nil {
		p.out = append(p.out, effect{kind: doAppend, owner: p, by: p.holder, app: *rd.Append})
	}
	if rd.Sync {
		p.out = append(p.out, effect{kind: doSync, owner: p, by: p.holder})
	}
	if rd.Stop {
		if rd.Release != nil {
			c := p.core.Claim()
			c.Lease = p.lease
			p.out = append(p.out, effect{kind: doRelease, owner: p, by: p.holder, claim: c, rel: *rd.Release})
		}
		w.tracef("%s stops: %v", p.holder, rd.StopErr)
		w.stopCore(p)
	}
}

// handOut checks a message handed to an agent: never twice, and only once
// the log holds the event that consumed it for that run.
func (w *world) handOut(p *proc, runID string, seq uint64, kind projections.ConsumptionKind) {
	to := fmt.Sprintf("%s of run %s (%s)", kind, runID, p.holder)
	if prev, dup := w.handed[seq]; dup {
		w.fail(CheckHandedOutOnce, fmt.Sprintf("message %d handed out as %s, and before as %s", seq, to, prev))
		return
	}
	w.handed[seq] = to
	m := w.message(seq)
	if m == nil || m.Consumed == nil || m.Consumed.RunID != runID || m.Consumed.Kind != kind {
		got := "not consumed"
		if m != nil && m.Consumed != nil {
			got = fmt.Sprintf("consumed as %s of run %s at %d", m.Consumed.Kind, m.Consumed.RunID, m.Consumed.Seq)
		}
		w.fail(CheckHandOutAfterLog, fmt.Sprintf("message %d handed out as %s, but the log has it %s", seq, to, got))
	}
}

// message returns the fold's message seq, or nil.
func (w *world) message(seq uint64) *projections.Message {
	for i := range w.fold.Messages {
		if w.fold.Messages[i].Seq == seq {
			return &w.fold.Messages[i]
		}
	}
	return nil
}
