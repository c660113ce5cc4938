package thread

import (
	"slices"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
)

// HistoryFrom returns a run's history and conversation (see
// [agent.Conversational]) from envs, the thread's events from
// HistoryStart(sr) up to the run's start (a rollback after the prompt
// leaves a run out): the messages sr.Recent names (all the
// messages when sr.Window is negative), less those a rolled-back run
// consumed, and the replies of the runs that started among envs and ended
// before the prompt, newest sr.Window entries of each. It is pure: the
// shell reads envs when the agent asks for its history, so the core keeps
// no conversation.
//
// A run that started before the window's first message and ended inside
// it is left out of the conversation, as its reply is mostly older.
func HistoryFrom(thread string, sr StartRun, envs []events.Envelope) (history, conversation []agent.Message) {
	v := projections.New(thread)
	for _, env := range envs {
		if env.Seq < sr.StartSeq || sr.StartSeq == 0 {
			v.Apply(env)
		}
	}
	keep := func(projections.Message) bool { return true }
	if sr.Window >= 0 {
		keep = func(m projections.Message) bool {
			if c := m.Consumed; c != nil && c.Kind == projections.ConsumedForked {
				return true // the source's, which Recent does not name
			}
			_, ok := slices.BinarySearch(sr.Recent, m.Seq)
			return ok
		}
	}
	for _, m := range v.History(sr.Prompt.Seq) {
		if keep(m) {
			history = append(history, toAgent(m))
		}
	}
	var from uint64
	if len(sr.Recent) > 0 {
		from = sr.Recent[0]
	}
	conversation = Conversation(v, history, sr.Prompt.Seq, from)
	if w := sr.Window; w >= 0 {
		if len(history) > w {
			history = history[len(history)-w:]
		}
		if len(conversation) > w {
			conversation = conversation[len(conversation)-w:]
		}
	}
	return history, conversation
}

// HistoryStart returns the sequence from which the shell reads the
// thread's events for [HistoryFrom]: the window's first message, or 1 for
// the whole thread or a fork whose own messages do not fill the window; 0
// when the run has no history to read.
func HistoryStart(sr StartRun) uint64 {
	switch {
	case sr.Window < 0:
		return 1
	case sr.Forked && len(sr.Recent) < sr.Window:
		return 1 // from the fork, whose source fills the window
	case len(sr.Recent) == 0:
		return 0
	}
	return sr.Recent[0]
}
