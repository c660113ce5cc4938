package audit

import (
	"fmt"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// countNoneSkipped counts the events NoneSkipped examines: those that
// consume a message.
func (a *Auditor) countNoneSkipped(env *events.Envelope) {
	if consumes(env) {
		a.checked[checkNoneSkipped]++
	}
}

// consumes reports whether env is a consuming event.
func consumes(env *events.Envelope) bool {
	switch env.Event.GetBody().(type) {
	case *eventspb.Event_RunStarted, *eventspb.Event_AnswerGiven, *eventspb.Event_SteeringGiven:
		return true
	}
	return false
}

// notPending reports the fold's finding that env, a consuming event, names
// no pending message (one not posted here, or a repost of a message's id)
// as a NoneSkipped violation: it consumes none of the log's messages, and
// the model's RunStart, Reply and Steer each consume the oldest pending
// one. Spec: NoneSkipped.
func (a *Auditor) notPending(th *thread, env *events.Envelope, reason string) {
	s := []uint64{env.Seq}
	if th.next < len(th.msgs) {
		s = []uint64{th.msgs[th.next].seq, env.Seq}
	}
	a.violation(checkNoneSkipped, th, s, fmt.Sprintf("%s at %d: %s", env.Type, env.Seq, reason))
}

// noneSkipped reports the fold's finding that env consumes message seq,
// pending but not the oldest pending one, as the violation it is: messages
// are consumed in order, and none is passed over. The older messages stay
// pending (the fold consumes seq alone), so the holder takes them next and
// that is no violation. Spec: NoneSkipped.
func (a *Auditor) noneSkipped(th *thread, env *events.Envelope, seq uint64) {
	if th.next < len(th.msgs) {
		older := th.msgs[th.next].seq
		a.violation(checkNoneSkipped, th, seqs(older, env.Seq), fmt.Sprintf(
			"%s at %d consumes message %d while message %d, posted before it, is pending", env.Type, env.Seq, seq, older))
	}
}
