package thread_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/thread"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
)

func (d *driver) postWith(text string, st events.Strategy) uint64 {
	d.t.Helper()
	ack, err := d.s.Post(context.Background(), d.thread, &eventspb.MessagePosted{Text: text, Strategy: string(st)})
	if err != nil {
		d.t.Fatal(err)
	}
	d.exec(thread.Ready{})
	return ack.Seq
}

func (d *driver) cancelReq(run string) {
	d.t.Helper()
	if _, err := d.s.Append(context.Background(), events.NewCancelRequested(d.thread, time.Now(), run, ""), events.Check{}); err != nil {
		d.t.Fatal(err)
	}
	d.exec(thread.Ready{})
}

func texts(d *driver, i int) []string {
	var out []string
	hist, _ := d.history(i)
	for _, m := range hist {
		out = append(out, m.Text)
	}
	return out
}

// A cancel request asks the shell once to cancel the run; the run's end is
// run_failed "cancelled" whatever the agent said, and the next run starts.
func TestCore_Decide_cancel(t *testing.T) {
	s := memstore.New(memstore.Config{})
	d := newDriver(t, s, "cancel", thread.Config{Agent: "echo"})
	d.post("a")
	b := d.post("b")
	run := d.starts[0].RunID
	d.cancelReq("")
	d.cancelReq(run) // a second request asks for nothing more
	if !slices.Equal(d.cancels, []string{run}) {
		t.Fatalf("cancels %v, want [%s] once", d.cancels, run)
	}
	d.input(thread.RunFinished{RunID: run, Err: errors.New("echo: context canceled")})
	r := d.fold().Runs[0]
	if r.Status != "failed" || r.Reason != events.ReasonCancelled {
		t.Fatalf("run ended %s %q, want failed cancelled", r.Status, r.Reason)
	}
	if len(d.starts) != 2 || d.starts[1].Prompt.Seq != b {
		t.Fatalf("next run %+v, want one on %d", d.starts[1:], b)
	}
}

// An interrupting post is neither steered nor queued: the core records
// run_interrupted, cancels the run, ends it "interrupted" and runs the post
// next; rollback leaves the interrupted run's prompt out of the history.
func TestCore_Decide_interruptAndRollback(t *testing.T) {
	for _, st := range []events.Strategy{events.StrategyInterrupt, events.StrategyRollback} {
		t.Run(string(st), func(t *testing.T) {
			s := memstore.New(memstore.Config{})
			d := newDriver(t, s, "int", thread.Config{Agent: "echo", Steerable: true})
			d.post("a")
			d.input(thread.RunFinished{RunID: d.starts[0].RunID, Output: "ok"})
			d.post("b")
			run := d.starts[1].RunID
			c := d.postWith("c", st)
			if len(d.deliver) != 0 {
				t.Fatalf("the interrupting post was delivered as steering: %+v", d.deliver)
			}
			if !slices.Equal(d.cancels, []string{run}) {
				t.Fatalf("cancels %v, want [%s]", d.cancels, run)
			}
			wantTypes(t, s, "int", "thread_claimed", "message_posted", "run_started", "run_completed",
				"message_posted", "run_started", "message_posted", "run_interrupted")
			d.input(thread.RunFinished{RunID: run, Err: context.Canceled})
			r := d.fold().Runs[1]
			if r.Status != "failed" || r.Reason != events.ReasonInterrupted || r.RolledBack != (st == events.StrategyRollback) {
				t.Fatalf("run ended %s %q rolled back %v", r.Status, r.Reason, r.RolledBack)
			}
			if len(d.starts) != 3 || d.starts[2].Prompt.Seq != c {
				t.Fatalf("next run %+v, want one on %d", d.starts[2:], c)
			}
			want := []string{"a", "b"}
			if st == events.StrategyRollback {
				want = []string{"a"}
			}
			if got := texts(d, 2); !slices.Equal(got, want) {
				t.Errorf("history %q, want %q", got, want)
			}
			// The conversation adds the first run's reply after its prompt.
			wantConv := []string{"a", "ok", "b"}
			if st == events.StrategyRollback {
				wantConv = []string{"a", "ok"}
			}
			var conv []string
			_, hc := d.history(2)
			for _, m := range hc {
				conv = append(conv, m.Text)
			}
			if !slices.Equal(conv, wantConv) {
				t.Errorf("conversation %q, want %q", conv, wantConv)
			}
		})
	}
}

// A run with an open request takes the next post as its answer, whatever
// the post's strategy: the run waits for it.
func TestCore_Decide_interruptAnswersOpenRequest(t *testing.T) {
	s := memstore.New(memstore.Config{})
	d := newDriver(t, s, "ask", thread.Config{Agent: "echo"})
	d.post("ask: name?")
	run := d.starts[0].RunID
	d.input(thread.RunAsked{RunID: run, RequestID: run + "/q1", Question: "name?"})
	d.postWith("Ada", events.StrategyInterrupt)
	if len(d.deliver) != 1 || d.deliver[0].Message.Text != "Ada" || len(d.cancels) != 0 {
		t.Fatalf("deliver %+v, cancels %v: want the post as the answer", d.deliver, d.cancels)
	}
}

// A run that completes although it was cancelled is recorded completed.
func TestCore_Decide_cancelRacesCompletion(t *testing.T) {
	s := memstore.New(memstore.Config{})
	d := newDriver(t, s, "race", thread.Config{Agent: "echo"})
	d.post("a")
	run := d.starts[0].RunID
	d.cancelReq("")
	d.input(thread.RunFinished{RunID: run, Output: "done anyway"})
	if r := d.fold().Runs[0]; r.Status != "completed" {
		t.Fatalf("run ended %s %q, want completed", r.Status, r.Reason)
	}
}
