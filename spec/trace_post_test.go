package spec

import (
	"strings"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/eventgen"
	"github.com/artifactr/artifactr/projections/audit"
)

// Issue 23, item 8: posts no client writes (schema 999, no message id, a
// 200-character message id, a claim_seq or holder, an expected-sequence
// check other than the reject strategy's) are anomalies: the fold counts
// each as a message. Issue 27: the validator shares the audit's rules, so
// for it too they are Post steps, not nonconformances (audit --spec lists
// them with the audit's anomalies). A well-formed post and a reject post's
// check on the run subject are no anomaly.
func TestTrace_malformedPosts(t *testing.T) {
	post := func(mut func(ev *eventspb.Event, h events.Header)) (*eventgen.Log, events.Envelope) {
		l := eventgen.NewLog()
		ev := eventgen.Writer{Thread: "T"}.Post("m1", "hi")
		h := eventgen.Header(events.TypeMessagePosted)
		if mut != nil {
			mut(ev, h)
		}
		data, err := events.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return l, l.Raw("threads.T.posted", h, data)
	}
	tests := []struct {
		name string
		mut  func(ev *eventspb.Event, h events.Header)
		want string // "" when well-formed
	}{
		{"well formed", nil, ""},
		{"reject check on the run subject", func(ev *eventspb.Event, h events.Header) {
			ev.GetMessagePosted().Strategy = "reject"
			h[events.HeaderExpectSeq] = []string{"0"}
			h[events.HeaderExpectSubj] = []string{"threads.T.run"}
		}, ""},
		{"schema 999", func(ev *eventspb.Event, h events.Header) { h[events.HeaderSchema] = []string{"999"} }, `schema "999"`},
		{"no message id", func(ev *eventspb.Event, h events.Header) { ev.GetMessagePosted().MessageId = "" }, "no message id"},
		{"200-character message id", func(ev *eventspb.Event, h events.Header) {
			ev.GetMessagePosted().MessageId = strings.Repeat("x", 200)
		}, "invalid message id"},
		{"claim_seq", func(ev *eventspb.Event, h events.Header) { ev.ClaimSeq = 7 }, "carry no claim"},
		{"holder", func(ev *eventspb.Event, h events.Header) { ev.Holder = "r1/x" }, "carry no claim"},
		{"expected sequence", func(ev *eventspb.Event, h events.Header) { h[events.HeaderExpectSeq] = []string{"3"} }, "expected-sequence check"},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			l, env := post(tc.mut)
			if env.Err != nil {
				t.Fatalf("decode: %v", env.Err)
			}
			a := audit.New()
			v := NewTraceValidator()
			for _, e := range l.Envs {
				a.Add(e)
				v.Add(e)
			}
			r, sr := a.Report(), v.Report()
			if tc.want == "" {
				if r.AnomalyCount != 0 || !sr.OK() {
					t.Fatalf("well-formed post: anomalies %+v, spec %+v", r.Anomalies, sr.Nonconforming)
				}
				return
			}
			if r.AnomalyCount != 1 || !strings.Contains(r.Anomalies[0].Message, tc.want) {
				t.Errorf("audit anomalies %+v, want one with %q", r.Anomalies, tc.want)
			}
			if !r.OK() || !sr.OK() {
				t.Errorf("audit violations %+v, spec nonconforming %+v, want neither", r.Violations, sr.Nonconforming)
			}
		})
	}
}
