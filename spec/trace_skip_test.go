package spec

import (
	"strings"
	"testing"
)

// A message passed over by steering or an answer, not only by a prompt
// (TestTrace_notOldestMessageFlagged), is flagged: NoneSkipped.
func TestTrace_skippedBySteeringOrAnswerFlagged(t *testing.T) {
	for _, answer := range []bool{false, true} {
		l := newLog()
		l.claim("A")
		l.start("A", "r1", l.post())
		l.ask("A", "r1", "q1")
		l.post()
		m3 := l.post()
		if answer {
			l.answer("A", "r1", "q1", m3)
		} else {
			l.steer("A", "r1", m3)
		}
		n := mustFlag(t, l, 7, "")
		if !strings.Contains(n.Reason, "not the oldest pending message") {
			t.Errorf("answer %v: Reason = %q, want the oldest pending message named", answer, n.Reason)
		}
	}
}

// A request answered, then answered again after another was opened: the
// second answer names a closed request.
func TestTrace_answeredAgainAfterAnotherAskFlagged(t *testing.T) {
	l := newLog()
	l.claim("A")
	l.start("A", "r1", l.post())
	l.ask("A", "r1", "q1")
	l.answer("A", "r1", "q1", l.post())
	l.ask("A", "r1", "q2")
	l.answer("A", "r1", "q1", l.post())
	n := mustFlag(t, l, 9, "Reply(A)")
	if !strings.Contains(n.Reason, `request "q1"`) {
		t.Errorf("Reason = %q, want request q1 named", n.Reason)
	}
}
