package summaries

import (
	"artifactr/events"
	"artifactr/events/eventspb"
)

// The double-texting strategies and cancel (issue 15), as a summary counts
// them: they change no field a summary keeps, and count the anomalies
// projections.Thread records for them, except the two that need the
// thread's messages (a second interrupt of a run, and an interrupt naming a
// post whose strategy does not interrupt).

func (s *Summary) applyStrategy(env *events.Envelope) {
	switch b := env.Event.GetBody().(type) {
	case *eventspb.Event_ThreadConfigured:
		if st, err := events.ParseStrategy(b.ThreadConfigured.GetStrategy()); err != nil || st == "" {
			s.Anomalies++
		}
	case *eventspb.Event_RunInterrupted:
		s.checkActive(b.RunInterrupted.GetRunId())
	}
}

func (s *Summary) postStrategy(b *eventspb.MessagePosted) {
	if _, err := events.ParseStrategy(b.GetStrategy()); err != nil {
		s.Anomalies++
	}
}
