package audit

import (
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/internal/eventgen"
)

// Issue 21's trail: a post lands while A holds the thread, A releases it
// as idle without taking the post, and nobody claims it again. With
// StrandedAfter set the report warns of it, once the bound has passed, and
// is still OK: a stranded thread breaks no invariant. A thread answered, or
// one whose post waits for a claim still within the bound, is no warning.
func TestAuditor_Report_stranded(t *testing.T) {
	l := eventgen.NewLog()
	a := claim(l, "A")
	m := l.Post(poster.Post("late", "hello")).Seq
	rel := l.CAS(a.Released())
	u := eventgen.Writer{Thread: "U"}
	mu := l.Post(u.Post("u1", "answered")).Seq
	b := eventgen.Writer{Thread: "U", Holder: "B"}
	b.ClaimSeq = l.CAS(b.Claimed(1)).Seq
	l.Fenced(b.Started("r1", mu))
	l.CAS(b.Completed("r1"))
	v := eventgen.Writer{Thread: "V"}
	fresh := l.Post(v.Post("v1", "just posted")).Seq

	bound := time.Minute
	for _, tc := range []struct {
		name string
		now  time.Time
		want []string
	}{
		{"within the bound", eventgen.Stored(rel.Seq).Add(bound), nil},
		{"past it for T", eventgen.Stored(rel.Seq).Add(bound + time.Millisecond), []string{"T"}},
		{"past it for both", eventgen.Stored(fresh).Add(bound + time.Millisecond), []string{"T", "V"}},
	} {
		au := NewWithOptions(Options{StrandedAfter: bound, Now: func() time.Time { return tc.now }})
		for _, env := range l.Envs {
			au.Add(env)
		}
		r := au.Report()
		if !r.OK() || r.StrandedCount != len(tc.want) || len(r.Stranded) != len(tc.want) {
			t.Fatalf("%s: ok %v, %d stranded %+v; want %v", tc.name, r.OK(), r.StrandedCount, r.Stranded, tc.want)
		}
		for i, th := range tc.want {
			if r.Stranded[i].Thread != th {
				t.Fatalf("%s: stranded %+v, want %v", tc.name, r.Stranded, tc.want)
			}
		}
		if len(tc.want) == 0 {
			continue
		}
		st := r.Stranded[0]
		if st.Since != eventgen.Stored(rel.Seq).UTC() || st.Pending != 1 || st.OldestSeq != m || st.ReleaseSeq != rel.Seq {
			t.Fatalf("T: %+v; want since its release %d, message %d pending", st, rel.Seq, m)
		}
		var out strings.Builder
		if err := r.WriteText(&out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "threads stranded") || !strings.Contains(out.String(), "thread T: 1 pending") || !strings.HasPrefix(out.String(), "audit OK") {
			t.Fatalf("text report:\n%s", out.String())
		}
	}
	// Off by default.
	if r := run(l.Envs); r.StrandedCount != 0 || len(r.Stranded) != 0 {
		t.Fatalf("without StrandedAfter: %+v", r.Stranded)
	}
}
