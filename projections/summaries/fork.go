package summaries

import (
	"artifactr/events"
	"artifactr/events/eventspb"
	"artifactr/projections"
)

// forked applies thread_forked as projections.Thread does (see
// projections.Fork): the copied messages are consumed history, the copied
// runs ended, an active one abandoned.
func (s *Summary) forked(env *events.Envelope, b *eventspb.ThreadForked) {
	if s.Messages > 0 || s.Runs > 0 || s.ClaimSeq != 0 || projections.ForkBodyError(s.Thread, env.Seq, b) != "" {
		s.Anomalies++
		return
	}
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
