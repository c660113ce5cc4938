package summaries

import (
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections"
)

// Fresh implements [projections.State]: nothing was folded before.
func (f summaryFold) Fresh() bool { return f.first }

// Forked implements [projections.State] as projections.Thread does (see
// projections.Fork): the copied messages are consumed history, the copied
// runs ended, an active one abandoned.
func (f summaryFold) Forked(_ *events.Envelope, b *eventspb.ThreadForked) {
	s := f.s
	s.ForkedFrom = b.GetSourceThread()
	if ms := b.GetMessages(); len(ms) > 0 {
		s.Messages = len(ms)
		s.Taken = ms[len(ms)-1].GetSeq()
	}
	if rs := b.GetRuns(); len(rs) > 0 {
		s.Runs = len(rs)
		last := rs[len(rs)-1]
		s.LastRun, s.LastRunStatus = last.GetRunId(), last.GetStatus()
		if s.LastRunStatus == string(projections.RunActive) {
			s.LastRunStatus = string(projections.RunAbandoned)
		}
	}
}
