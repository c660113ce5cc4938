package spec

import (
	"fmt"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

func (l *tlog) postWith(st events.Strategy) uint64 {
	return l.add(&eventspb.Event{Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: fmt.Sprintf("m%d", len(*l.envs)+1), Strategy: string(st)}}})
}

func (l *tlog) configure(st events.Strategy) { l.add(events.NewThreadConfigured(l.thread, t0, st)) }

func (l *tlog) cancelReq(run string) { l.add(events.NewCancelRequested(l.thread, t0, run, "c")) }

func (l *tlog) interrupt(h, run string, msg uint64, rollback bool) {
	l.add(events.NewRunInterrupted(l.claims[h], t0, run, msg, rollback))
}

func (l *tlog) failWith(h, run, reason string) {
	l.add(events.NewRunFailed(l.claims[h], t0, run, reason))
}

// Cancel, interrupt and rollback as the runner writes them, and reject
// posts made while no run is active, conform.
// Spec: PostIdle; the strategy events are stutters.
func TestTrace_strategiesConform(t *testing.T) {
	l := newLog()
	l.configure(events.StrategyReject)
	m1 := l.post() // the thread's strategy: reject, idle
	l.claim("A")
	l.start("A", "r1", m1)
	l.cancelReq("")
	l.failWith("A", "r1", events.ReasonCancelled)
	m2 := l.postWith(events.StrategyEnqueue)
	l.start("A", "r2", m2)
	m3 := l.postWith(events.StrategyInterrupt)
	l.interrupt("A", "r2", m3, false)
	l.failWith("A", "r2", events.ReasonInterrupted)
	l.start("A", "r3", m3)
	m4 := l.postWith(events.StrategyRollback)
	l.interrupt("A", "r3", m4, true)
	l.output("A", "r3")
	l.failWith("A", "r3", events.ReasonInterrupted)
	l.cancelReq("r3") // too late: changes nothing
	l.start("A", "r4", m4)
	l.end("A", "r4")
	l.postWith(events.StrategyReject)
	mustConform(t, l)
}

// A reject post stored while a run is active (one that skipped the check
// on the run subject) is not PostIdle.
func TestTrace_rejectWhileActiveFlagged(t *testing.T) {
	l := newLog()
	m1 := l.post()
	l.claim("A")
	l.start("A", "r1", m1)
	bad := l.postWith(events.StrategyReject)
	n := mustFlag(t, l, bad, "Post")
	if n.Action != "PostIdle" {
		t.Errorf("action %q, want PostIdle", n.Action)
	}
}

// The thread's strategy, set by its first post, makes a later post with
// none a reject post.
func TestTrace_firstPostSetsStrategy(t *testing.T) {
	l := newLog()
	m1 := l.postWith(events.StrategyReject)
	l.claim("A")
	l.start("A", "r1", m1)
	mustFlag(t, l, l.post(), "")
}

// run_interrupted must name the active run, as run_output must.
func TestTrace_interruptOfEndedRunFlagged(t *testing.T) {
	l := newLog()
	m1 := l.post()
	l.claim("A")
	l.start("A", "r1", m1)
	l.end("A", "r1")
	m2 := l.postWith(events.StrategyInterrupt)
	l.interrupt("A", "r1", m2, false)
	mustFlag(t, l, uint64(len(*l.envs)), "")
}
