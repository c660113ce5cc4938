package spec

import (
	"strings"
	"testing"

	"github.com/artifactr/artifactr/events/eventspb"
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

// TestTrace_forkNotFirstFlagged: a fork after the thread's first event, or
// a second fork, does not conform.
func TestTrace_forkNotFirstFlagged(t *testing.T) {
	l := newLog()
	src := l.post()
	l.post()
	seq := l.fork("src", src)
	if n := mustFlag(t, l, seq, ""); !strings.Contains(n.Reason, "first event") {
		t.Errorf("reason %q", n.Reason)
	}
	l = newLog()
	l.fork("src", 1)
	seq = l.fork("src", 1)
	mustFlag(t, l, seq, "")
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
