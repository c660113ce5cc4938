package spec

import (
	"strings"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections"
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

func (l *tlog) refFork(source string, at uint64) uint64 {
	return l.add(&eventspb.Event{Body: &eventspb.Event_ThreadForked{ThreadForked: &eventspb.ThreadForked{SourceThread: source, SourceSeq: at, Reference: true}}})
}

// TestTrace_referenceForkConforms: a fork by reference, resolved or not,
// is the same stutter as the copied form, and a fork of it too.
func TestTrace_referenceForkConforms(t *testing.T) {
	l := newLog()
	m := l.post()
	l.claim("a")
	l.start("a", "r1", m)
	l.end("a", "r1")
	n := l.on("n")
	at := n.refFork("t", 4)
	p := n.post()
	n.claim("b")
	n.start("b", "r2", p)
	n.end("b", "r2")
	l.on("o").refFork("n", p)
	mustConform(t, l)
	(*l.envs)[at-1].Fork = &events.ForkHistory{Body: &eventspb.ThreadForked{SourceThread: "t", SourceSeq: 4,
		Messages: []*eventspb.ForkedMessage{{Seq: m, ConsumedAs: "prompt"}}}}
	mustConform(t, l)
}

// TestTrace_referenceForkFlagged: a run of a fork by reference that takes
// a message of its history does not conform (I1); a reference that carries
// a copy besides, or one the audit resolved to no history, is an anomaly
// of both audits.
// Spec: I1_ConsumedAtMostOnce.
func TestTrace_referenceForkFlagged(t *testing.T) {
	l := newLog()
	m := l.post()
	n := l.on("n")
	n.refFork("t", m)
	n.claim("b")
	seq := uint64(len(*l.envs) + 1)
	n.start("b", "r1", m)
	mustFlag(t, n, seq, "")

	l = newLog()
	m = l.post()
	n = l.on("n")
	seq = n.add(&eventspb.Event{Body: &eventspb.Event_ThreadForked{ThreadForked: &eventspb.ThreadForked{SourceThread: "t", SourceSeq: m, Reference: true,
		Messages: []*eventspb.ForkedMessage{{Seq: m}}}}})
	// An event no client writes is an anomaly of both audits, which share
	// one rule set (rules.go): the fold ignores it, and the model does not
	// step on it.
	mustConform(t, l)
	if an := foldOf(l, "n").Anomalies; len(an) == 0 || !strings.Contains(an[0].Reason, "copies none") || an[0].Seq != seq {
		t.Errorf("reference with a copy: anomalies %+v, want one at %d", an, seq)
	}

	l = newLog()
	m = l.post()
	n = l.on("n")
	seq = n.refFork("t", m)
	(*l.envs)[seq-1].Fork = &events.ForkHistory{Bad: "thread_forked names t at 1, which is not an event of t"}
	mustConform(t, l) // an anomaly of both, as above
	if an := foldOf(l, "n").Anomalies; len(an) == 0 || !strings.Contains(an[0].Reason, "not an event of t") {
		t.Errorf("bad reference: anomalies %+v", an)
	}
}

// foldOf folds thread th's events of l.
func foldOf(l *tlog, th string) *projections.Thread {
	var envs []events.Envelope
	for _, e := range *l.envs {
		if e.Thread == th {
			envs = append(envs, e)
		}
	}
	return projections.Fold(th, envs)
}
