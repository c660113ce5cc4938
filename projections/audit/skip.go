package audit

import (
	"fmt"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// countNoneSkipped counts the events NoneSkipped examines: those that
// consume a message.
func (a *Auditor) countNoneSkipped(env *events.Envelope) {
	switch env.Event.GetBody().(type) {
	case *eventspb.Event_RunStarted, *eventspb.Event_AnswerGiven, *eventspb.Event_SteeringGiven:
		a.checked[checkNoneSkipped]++
	}
}

// noneSkipped reports the fold's finding that env consumes message seq,
// pending but not the oldest pending one, as the violation it is: messages
// are consumed in order, and none is passed over. Spec: NoneSkipped.
func (a *Auditor) noneSkipped(th *thread, env *events.Envelope, seq uint64) {
	i, ok := th.message(seq)
	switch {
	case ok && i < th.next:
		a.violation(checkNoneSkipped, th, seqs(seq, env.Seq), fmt.Sprintf(
			"%s at %d consumes message %d, which was passed over: the taken cursor is at %d", env.Type, env.Seq, seq, th.taken))
	case th.next < len(th.msgs):
		older := th.msgs[th.next].seq
		a.violation(checkNoneSkipped, th, seqs(older, env.Seq), fmt.Sprintf(
			"%s at %d consumes message %d while message %d, posted before it, is pending", env.Type, env.Seq, seq, older))
	}
}
