package thread_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/artifactr/artifactr/actors/thread"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/audit"
)

// racer is a store whose next run_output append is preceded by a forger's
// writes: they land while the holder's append is in flight, so the holder
// observes them before it can plan on what they name.
type racer struct {
	events.Store
	before func()
}

func (r *racer) Append(ctx context.Context, ev *eventspb.Event, chk events.Check, opts ...events.AppendOption) (events.Ack, error) {
	if f := r.before; f != nil && events.TypeOf(ev) == events.TypeRunOutput {
		r.before = nil
		f()
	}
	return r.Store.Append(ctx, ev, chk, opts...)
}

// Issue 23, item 2: a consuming event under the holder's claim that it did
// not write consumes its message in the core's view, as in the log: the
// holder never runs or gives that message again. A forged run_started is
// abandoned (fenced), and the holder's run it displaced is given up; an
// answer or steering given to the holder's run reaches it. In every case
// the log audits with no I1 or I3 violation at any of the holder's writes,
// and the thread goes on: the next message runs.
func TestCore_Decide_forgedConsumersCount(t *testing.T) {
	tests := []struct {
		name string
		// ask opens a request on the holder's run first; steer makes the
		// core steerable.
		ask, steer bool
		forge      func(t *testing.T, s events.Store, c events.Claim, run string, two uint64)
		// displaced: the forgery displaced the holder's run; delivered:
		// the forged answer or steering is given to it.
		displaced, delivered bool
		// wantAudit is the check the forgery breaks; keepsTwo: the forgery
		// names a consumed message, so "two" stays pending.
		wantAudit string
		keepsTwo  bool
	}{
		{name: "run_started for the pending message",
			forge: func(t *testing.T, s events.Store, c events.Claim, run string, two uint64) {
				forge(t, s, events.NewRunStarted(c, c.Lease.Expires, "evil", two, "evil"), events.Fenced(c), "x:1")
			}, displaced: true, wantAudit: audit.CheckI3},
		{name: "run_started for the consumed message",
			forge: func(t *testing.T, s events.Store, c events.Claim, run string, two uint64) {
				forge(t, s, events.NewRunStarted(c, c.Lease.Expires, "evil", 1 /* "go", the holder's prompt */, "evil"), events.Fenced(c), "x:1")
			}, displaced: true, wantAudit: audit.CheckI1, keepsTwo: true},
		{name: "answer_given to a request that does not exist",
			forge: func(t *testing.T, s events.Store, c events.Claim, run string, two uint64) {
				forge(t, s, events.NewAnswerGiven(c, c.Lease.Expires, run, "nope", two), events.Fenced(c), "x:1")
			}, wantAudit: audit.CheckGivenToActive},
		{name: "answer_given to the open request", ask: true,
			forge: func(t *testing.T, s events.Store, c events.Claim, run string, two uint64) {
				forge(t, s, events.NewAnswerGiven(c, c.Lease.Expires, run, run+"/q1", two), events.Fenced(c), "x:1")
			}, delivered: true},
		{name: "steering_given, not steerable",
			forge: func(t *testing.T, s events.Store, c events.Claim, run string, two uint64) {
				forge(t, s, events.NewSteeringGiven(c, c.Lease.Expires, run, two), events.Fenced(c), "x:1")
			}},
		{name: "steering_given, steerable", steer: true,
			forge: func(t *testing.T, s events.Store, c events.Claim, run string, two uint64) {
				forge(t, s, events.NewSteeringGiven(c, c.Lease.Expires, run, two), events.Fenced(c), "x:1")
			}, delivered: true},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			base := memstore.New(memstore.Config{})
			s := &racer{Store: base}
			th := "forged"
			mustPost(t, s, th, "go")
			d := newDriver(t, s, th, thread.Config{Agent: "echo", Steerable: tc.steer})
			run := d.starts[0].RunID
			if tc.ask {
				d.input(thread.RunAsked{RunID: run, RequestID: run + "/q1", Question: "?"})
			}
			var two uint64
			s.before = func() {
				two = mustPost(t, base, th, "two")
				tc.forge(t, base, d.core.Claim(), run, two)
			}
			d.input(thread.RunOutput{RunID: run, Text: "working"})
			if two == 0 {
				t.Fatal("the forger did not race the output")
			}
			v := d.core.View()
			// The view keeps only pending messages (projections.Thread.Compact).
			if pending := slices.ContainsFunc(v.Pending(), func(m projections.Message) bool { return m.Seq == two }); pending != tc.keepsTwo {
				t.Fatalf("message %d pending in the view: %v, want %v", two, pending, tc.keepsTwo)
			}
			if len(d.anomalies) != 1 || d.anomalies[0].Seq <= two {
				t.Fatalf("anomalies %+v, want the forgery reported", d.anomalies)
			}
			switch n := len(d.deliver); {
			case tc.delivered && (n != 1 || d.deliver[0].Message.Seq != two):
				t.Fatalf("deliveries %+v, want message %d given to the run", d.deliver, two)
			case !tc.delivered && n != 0:
				t.Fatalf("deliveries %+v, want none", d.deliver)
			}
			if tc.displaced {
				if len(d.cancels) != 1 || d.cancels[0] != run {
					t.Fatalf("cancels %v, want the displaced run %s", d.cancels, run)
				}
				if n := len(runEvents(t, base, th, events.TypeRunAbandoned)); n != 1 || v.ActiveRun != nil {
					t.Fatalf("%d run_abandoned, active %+v; want the forged run abandoned", n, v.ActiveRun)
				}
				// The displaced run's report is not acted on; the Ready
				// that comes with it is carried out.
				var rej *thread.RejectError
				rd, err := d.core.Decide(thread.RunFinished{RunID: run, Output: "late"})
				if !errors.As(err, &rej) {
					t.Fatalf("the displaced run's end: %v, want it rejected", err)
				}
				d.exec(rd)
			} else {
				d.input(thread.RunFinished{RunID: run, Output: "done"})
			}
			// Once the displaced run has ended, a message still pending runs
			// at once; the forgery's message never does.
			want := 1
			if tc.displaced && tc.keepsTwo {
				want = 2
			}
			if len(d.starts) != want || want == 2 && d.starts[1].Prompt.Seq != two {
				t.Fatalf("starts %+v, want %d: the forgery's message ran, or the pending one did not", d.starts, want)
			}
			// The thread goes on: the next message runs.
			three := mustPost(t, base, th, "three")
			d.exec(thread.Ready{})
			next := three
			if tc.keepsTwo {
				next = two
			}
			if len(d.starts) != 2 || d.starts[1].Prompt.Seq != next {
				t.Fatalf("starts %+v, want a run for message %d", d.starts, next)
			}
			if d.stopped {
				t.Fatalf("the holder stopped: %v", d.stopErr)
			}
			checkForgedAudit(t, base, th, tc.wantAudit)
		})
	}
}

// checkForgedAudit audits th's log: no I1 or I3 violation names one of the
// holder's writes (its message ids are <thread>:<claim>:<n>), and the
// forgery breaks want, when given.
func checkForgedAudit(t *testing.T, s events.Store, th string, want string) {
	t.Helper()
	envs, err := s.Load(context.Background(), th, 1)
	if err != nil {
		t.Fatal(err)
	}
	a := audit.New()
	honest := map[uint64]bool{}
	for _, e := range envs {
		a.Add(e)
		honest[e.Seq] = strings.HasPrefix(e.MsgID, th+":")
	}
	r := a.Report()
	found := want == ""
	for _, v := range r.Violations {
		last := v.Seqs[len(v.Seqs)-1]
		if (v.Check == audit.CheckI1 || v.Check == audit.CheckI3) && honest[last] {
			t.Errorf("the holder wrote a violation: %+v", v)
		}
		found = found || v.Check == want
	}
	if !found {
		t.Errorf("violations %+v: the forgery is not flagged %s", r.Violations, want)
	}
}

// Issue 23: a forged run_started that names a newer message than the oldest
// pending one consumes that message alone. The message it passed over stays
// pending, so the holder runs it next: before, the fold's cursor moved past
// it and no runner would ever take it.
func TestCore_Decide_forgedSkipStrandsNothing(t *testing.T) {
	base := memstore.New(memstore.Config{})
	s := &racer{Store: base}
	th := "skipped"
	mustPost(t, s, th, "go")
	d := newDriver(t, s, th, thread.Config{Agent: "echo"})
	run := d.starts[0].RunID
	var two, three uint64
	s.before = func() {
		two = mustPost(t, base, th, "two")
		three = mustPost(t, base, th, "three")
		c := d.core.Claim()
		forge(t, base, events.NewRunStarted(c, c.Lease.Expires, "evil", three, "evil"), events.Fenced(c), "x:1")
	}
	d.input(thread.RunOutput{RunID: run, Text: "working"})
	if two == 0 {
		t.Fatal("the forger did not race the output")
	}
	if p := d.core.View().Pending(); len(p) != 1 || p[0].Seq != two {
		t.Fatalf("pending %+v, want message %d, which the forgery passed over", p, two)
	}
	// The holder's run, displaced by the forged one, ends; its report is
	// rejected, and the holder plans again at once, not at its next tick.
	var rej *thread.RejectError
	rd, err := d.core.Decide(thread.RunFinished{RunID: run, Output: "late"})
	if !errors.As(err, &rej) {
		t.Fatalf("the displaced run's end: %v, want it rejected", err)
	}
	d.exec(rd)
	if len(d.starts) != 2 || d.starts[1].Prompt.Seq != two {
		t.Fatalf("starts %+v, want a run for message %d", d.starts, two)
	}
	d.input(thread.RunFinished{RunID: d.starts[1].RunID, Output: "done"})
	if len(d.starts) != 2 {
		t.Fatalf("starts %+v: message %d, which the forgery consumed, ran", d.starts, three)
	}
	checkForgedAudit(t, base, th, audit.CheckNoneSkipped)
}
