package thread

import (
	"errors"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
)

// Cancel and the interrupting strategies (issue 15). A cancel_requested or
// a run_interrupted in the log marks the active run; the core then asks
// the shell once to cancel the run's context, takes no more messages for
// it, and records its end as run_failed with reason "cancelled" or
// "interrupted" once its goroutine reports.

// maybeCancel asks the shell to cancel this claim's active run once the log
// holds a cancel request or an interrupt of it.
func (c *Core) maybeCancel(rd Ready) Ready {
	r := c.view.ActiveRun
	if c.done || r == nil || r.ClaimSeq != c.claim.Seq || !c.started[r.ID] || c.finished[r.ID] || c.cancelled[r.ID] {
		return rd
	}
	if r.CancelSeq == 0 && r.InterruptSeq == 0 {
		return rd
	}
	c.cancelled[r.ID] = true
	rd.Cancel = append(rd.Cancel, r.ID)
	return rd
}

// endErr is the error a run's end records: a run that failed after it was
// cancelled or interrupted fails with that reason, whatever its agent
// said. A run that completed anyway completed.
func (c *Core) endErr(err error) error {
	r := c.view.ActiveRun
	if err == nil || r == nil {
		return err
	}
	switch {
	case r.InterruptSeq != 0 && (r.CancelSeq == 0 || r.InterruptSeq < r.CancelSeq):
		return errors.New(events.ReasonInterrupted)
	case r.CancelSeq != 0:
		return errors.New(events.ReasonCancelled)
	}
	return err
}

// interrupter returns the oldest pending message posted after the active
// run started whose strategy interrupts it, if the run is not interrupted
// yet.
func (c *Core) interrupter() (projections.Message, bool) {
	v := c.view
	r := v.ActiveRun
	if r == nil || r.InterruptSeq != 0 {
		return projections.Message{}, false
	}
	// Only messages posted since the run started can interrupt it: scan
	// them from the newest, so the cost is theirs, not the thread's.
	var by projections.Message
	found := false
	for i := len(v.Messages) - 1; i >= 0 && v.Messages[i].Seq > r.StartSeq; i-- {
		if m := v.Messages[i]; m.Consumed == nil && v.StrategyOf(m).Interrupts() {
			by, found = m, true
		}
	}
	return by, found
}
