package spec

import (
	"slices"
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
		if !slices.Equal(n.Checks, []string{"NoneSkipped"}) || n.Model != "" {
			t.Errorf("answer %v: checks %v, model %q: want NoneSkipped, which the model cannot see", answer, n.Checks, n.Model)
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

// A log beyond the checked model's constants is validated and reported as
// such, once per thread and dimension; a log within them is not.
func TestTrace_beyondCheckedReported(t *testing.T) {
	small := newLog()
	small.claim("A")
	small.start("A", "r1", small.post())
	if r := validate(*small.envs); !r.OK() || len(r.Beyond) != 0 {
		t.Fatalf("report = %+v, want OK and nothing beyond", r)
	}
	l := newLog()
	l.claim("A")
	l.start("A", "r1", l.post())
	l.ask("A", "r1", "q1")
	l.ask("A", "r1", "q2")
	l.ask("A", "r1", "q3") // 6: three open
	l.post()
	l.post()
	l.post()
	l.post() // 10: four pending
	l.post()
	r := validate(*l.envs)
	if !r.OK() {
		t.Fatalf("%s", r.Nonconforming[0])
	}
	var got []uint64
	for _, b := range r.Beyond {
		t.Logf("%+v", b)
		got = append(got, b.Seq)
	}
	if !slices.Equal(got, []uint64{6, 10}) {
		t.Errorf("beyond at %v, want 6 (open requests) and 10 (pending messages)", got)
	}
}

// Each dimension within some checked model, but not all in one: two claims
// that can still write, three messages pending and two open requests at
// once is in no checked model, and is reported so.
func TestTrace_beyondCheckedJointlyReported(t *testing.T) {
	l := newLog()
	l.claim("A")
	l.start("A", "r1", l.post())
	l.ask("A", "r1", "q1")
	l.ask("A", "r1", "q2")
	l.claim("B") // 6: A's run is active, so A can still write
	l.post()
	l.post()
	l.post() // 9: three pending
	r := validate(*l.envs)
	if !r.OK() {
		t.Fatalf("%s", r.Nonconforming[0])
	}
	if len(r.Beyond) != 1 || r.Beyond[0].Seq != 9 || !strings.Contains(r.Beyond[0].What, "no one checked model") {
		t.Errorf("beyond %+v, want one joint report at 9", r.Beyond)
	}
}
