package events

import (
	"context"

	"github.com/artifactr/artifactr/events/eventspb"
)

// Head is what a post needs to know of its thread, read without loading
// the thread: a post costs the same at event 10 and at event 1,000,000.
type Head struct {
	// Strategy is the thread's strategy as the store knows it without a
	// fold: the newest thread_configured's, else the thread's first post's,
	// "" when neither set one. StrategyKnown is false when the store could
	// not tell (the thread's first event on its posted subject is not a
	// post, and no thread_configured is recorded): fold the thread then.
	Strategy      Strategy
	StrategyKnown bool
	// LastRunSeq is the last sequence on the thread's run subject (0:
	// none), the check a reject post carries.
	LastRunSeq uint64
	// ActiveRun is the id of the run the run subject's last event says is
	// active, "" when it says none is: every event of a run, from its
	// run_started to its end, is on the run subject, and an end that is
	// not the active run's is refused by its compare-and-set.
	ActiveRun string
	// Posted is the sequence of the message posted with the message id
	// asked for, 0 when there is none (or its post is still in flight).
	Posted uint64
}

// HeadReader reads a thread's [Head] in a few reads, whatever the
// thread's length. natsstore and memstore implement it.
type HeadReader interface {
	// ThreadHead returns thread's head, with Posted the sequence of
	// messageID's message ("" asks for none).
	ThreadHead(ctx context.Context, thread, messageID string) (Head, error)
}

// RunActiveAfter returns the run that ev, the last event on a run subject,
// leaves active, "" when it leaves none.
func RunActiveAfter(ev *eventspb.Event) string {
	switch b := ev.GetBody().(type) {
	case *eventspb.Event_RunStarted:
		return b.RunStarted.GetRunId()
	case *eventspb.Event_RunOutput:
		return b.RunOutput.GetRunId()
	case *eventspb.Event_RequestOpened:
		return b.RequestOpened.GetRunId()
	case *eventspb.Event_AnswerGiven:
		return b.AnswerGiven.GetRunId()
	case *eventspb.Event_SteeringGiven:
		return b.SteeringGiven.GetRunId()
	case *eventspb.Event_RunInterrupted:
		return b.RunInterrupted.GetRunId()
	}
	return ""
}

// StrategyPoster posts a message under its thread's strategy in one step:
// the head's reads and the post's own writes overlap, where a
// [HeadReader]'s caller reads first and posts after. natsstore implements
// it.
type StrategyPoster interface {
	// PostThreadStrategy posts m, which names no strategy, naming its
	// thread's as read in the post (enqueue when the thread has none).
	// When that is reject and a run is active, it returns an error
	// wrapping [ErrThreadBusy], nothing written; a repost of an id the
	// thread has returns the original, busy or not. decided false means
	// it could not decide (the head does not tell the strategy, or a run
	// started or ended between the read and the post) and wrote nothing:
	// the caller posts by reading the head first.
	PostThreadStrategy(ctx context.Context, thread string, m *eventspb.MessagePosted, opts ...PostOption) (ack Ack, decided bool, err error)
}
