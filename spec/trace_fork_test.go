package spec

import (
	"strings"
	"testing"

	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections/audit"
)

func (l *tlog) fork(source string, at uint64, msgs ...uint64) uint64 {
	b := &eventspb.ThreadForked{SourceThread: source, SourceSeq: at}
	for _, m := range msgs {
		b.Messages = append(b.Messages, &eventspb.ForkedMessage{Seq: m, ConsumedAs: "prompt"})
	}
	return l.add(&eventspb.Event{Body: &eventspb.Event_ThreadForked{ThreadForked: b}})
}

// TestTrace_forkConforms: a fork as a thread's first event is a stutter;
// the new thread then posts, claims and runs as any other.
func TestTrace_forkConforms(t *testing.T) {
	l := newLog()
	m := l.post()
	l.claim("a")
	l.start("a", "r1", m)
	l.end("a", "r1")
	n := l.on("n")
	n.fork("t", 4, m)
	p := n.post()
	n.claim("b")
	n.start("b", "r2", p)
	n.end("b", "r2")
	mustConform(t, l)
}

// TestTrace_forkNotFirstIsAnAnomaly: a fork after the thread's first
// event, or a second fork, is an anomaly that the fold ignores (its append
// expects the posted subject empty, so no store lands it): the plain audit
// lists it and passes, and the validator, on the log as the fold reads it,
// takes no step for it. One rule set: neither fails (issue 27).
func TestTrace_forkNotFirstIsAnAnomaly(t *testing.T) {
	l := newLog()
	src := l.post()
	l.post()
	seq := l.fork("src", src)
	second := newLog()
	m := second.post()
	second = second.on("n")
	second.fork("t", m)
	seq2 := second.fork("t", m)
	for _, c := range []struct {
		l   *tlog
		seq uint64
	}{{l, seq}, {second, seq2}} {
		mustConform(t, c.l)
		a := audit.New()
		for _, e := range *c.l.envs {
			a.Add(e)
		}
		r := a.Report()
		if !r.OK() || r.AnomalyCount != 1 || r.Anomalies[0].Seq != c.seq || !strings.Contains(r.Anomalies[0].Message, "first event") {
			t.Errorf("audit: %+v %+v, want one anomaly at %d", r.Violations, r.Anomalies, c.seq)
		}
	}
}

// TestTrace_forkedMessageIsNotPending: a run in the forked thread that
// takes a copied message as its prompt does not conform (I1).
func TestTrace_forkedMessageIsNotPending(t *testing.T) {
	l := newLog()
	m := l.post()
	n := l.on("n")
	n.fork("t", m, m)
	n.claim("b")
	seq := uint64(len(*l.envs) + 1)
	n.start("b", "r1", m)
	mustFlag(t, n, seq, "")
}
