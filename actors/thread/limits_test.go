package thread_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/artifactr/artifactr/actors/thread"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/projections"
)

// limit is the store's event size limit in these tests: small, so that
// texts over it are cheap.
const limit = 4096

// runEvents returns the thread's events of type typ.
func runEvents(t *testing.T, s events.Store, th string, typ events.Type) []events.Envelope {
	t.Helper()
	envs, err := s.Load(context.Background(), th, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out []events.Envelope
	for _, e := range envs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// Long texts are split into events that each fit the store's limit, so a
// long answer is delivered, not failed; a reason too long is cut. The core
// knows the limit (Config.MaxEventBytes) here.
func TestCore_Decide_longTextsSplit(t *testing.T) {
	long := strings.Repeat("héllo wörld ", 1000) // 14 KB, multi-byte runes
	tests := []struct {
		name  string
		input func(run string) thread.Input
		check func(t *testing.T, s events.Store, th string, v *projections.Thread)
	}{
		{"output", func(run string) thread.Input { return thread.RunOutput{RunID: run, Text: long} },
			func(t *testing.T, s events.Store, th string, v *projections.Thread) {
				if got := strings.Join(v.Runs[0].Outputs, ""); got != long {
					t.Fatalf("outputs joined: %d bytes, want the %d-byte text", len(got), len(long))
				}
				if n := len(v.Runs[0].Outputs); n < 4 {
					t.Fatalf("%d run_output events for %d bytes under a %d-byte limit", n, len(long), limit)
				}
			}},
		{"final output", func(run string) thread.Input { return thread.RunFinished{RunID: run, Output: long} },
			func(t *testing.T, s events.Store, th string, v *projections.Thread) {
				r := v.Runs[0]
				if r.Status != projections.RunCompleted || r.Output != "" || strings.Join(r.Outputs, "") != long {
					t.Fatalf("run %s output %q, outputs of %d bytes; want completed, its output in run_output events",
						r.Status, r.Output, len(strings.Join(r.Outputs, "")))
				}
			}},
		{"failure reason", func(run string) thread.Input { return thread.RunFinished{RunID: run, Err: errors.New(long)} },
			func(t *testing.T, s events.Store, th string, v *projections.Thread) {
				r := v.Runs[0]
				if r.Status != projections.RunFailed || !strings.HasPrefix(r.Reason, "héllo") || !strings.HasSuffix(r.Reason, "bytes cut)") {
					t.Fatalf("run %s reason %.40q...; want failed with the reason cut", r.Status, r.Reason)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			s := memstore.New(memstore.Config{MaxEventBytes: limit})
			th := "split"
			mustPost(t, s, th, "go")
			d := newDriver(t, s, th, thread.Config{Agent: "echo", MaxEventBytes: limit})
			run := d.starts[0].RunID
			d.input(tc.input(run))
			if _, ok := tc.input(run).(thread.RunOutput); ok {
				d.input(thread.RunFinished{RunID: run, Output: "ok"})
			}
			v := d.core.View()
			if v.ActiveRun != nil || len(v.Anomalies) != 0 || len(d.anomalies) != 0 {
				t.Fatalf("after the run: active %v, view anomalies %v, core anomalies %v", v.ActiveRun, v.Anomalies, d.anomalies)
			}
			for _, e := range runEvents(t, s, th, events.TypeRunOutput) {
				if txt := e.Event.GetRunOutput().GetText(); !utf8.ValidString(txt) {
					t.Fatalf("run_output at %d is not valid UTF-8", e.Seq)
				}
			}
			tc.check(t, s, th, d.fold()) // the core keeps no texts
			// The thread goes on.
			next := d.post("next")
			if len(d.starts) != 2 || d.starts[1].Prompt.Seq != next {
				t.Fatalf("starts %+v, want a second run on %d", d.starts, next)
			}
		})
	}
}

// An append the store refuses for good (here: over a limit the core was not
// told) ends the run as run_failed with the store's reason, which names the
// size and the limit; the run is cancelled and the thread goes on. Before,
// the core took the refusal for a conflict and retried it for ever.
func TestCore_Decide_permanentRefusalFailsRun(t *testing.T) {
	big := strings.Repeat("x", 2*limit)
	tests := []struct {
		name  string
		input func(run string) thread.Input
		typ   events.Type
	}{
		{"output", func(run string) thread.Input { return thread.RunOutput{RunID: run, Text: big} }, events.TypeRunOutput},
		{"question", func(run string) thread.Input {
			return thread.RunAsked{RunID: run, RequestID: run + "/q1", Question: big}
		}, events.TypeRequestOpened},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := memstore.New(memstore.Config{MaxEventBytes: limit})
			th := "refused"
			mustPost(t, s, th, "go")
			mustPost(t, s, th, "then")
			d := newDriver(t, s, th, thread.Config{Agent: "echo"}) // limit unknown: default 1 MiB
			run := d.starts[0].RunID
			d.input(tc.input(run))
			failed := runEvents(t, s, th, events.TypeRunFailed)
			if len(failed) != 1 {
				t.Fatalf("%d run_failed, want 1; log %v", len(failed), types(t, s, th))
			}
			reason := failed[0].Event.GetRunFailed().GetReason()
			for _, want := range []string{string(tc.typ), "too large", "4096"} {
				if !strings.Contains(reason, want) {
					t.Fatalf("reason %q does not name %q", reason, want)
				}
			}
			if len(d.cancels) != 1 || d.cancels[0] != run {
				t.Fatalf("cancels %v, want the run %s", d.cancels, run)
			}
			if len(d.anomalies) != 1 || d.anomalies[0].Type != tc.typ {
				t.Fatalf("anomalies %+v, want the refused %s", d.anomalies, tc.typ)
			}
			// No second run while the cancelled one has not ended.
			if len(d.starts) != 1 {
				t.Fatalf("a run started while the cancelled one runs: %+v", d.starts)
			}
			// The cancelled run reports its end late; it is ignored, and the
			// next message runs at once (the Ready that comes with the
			// rejection), not at the next tick.
			rd, err := d.core.Decide(thread.RunFinished{RunID: run, Err: context.Canceled})
			if err == nil {
				t.Fatal("the cancelled run's end was accepted: it would be written twice")
			}
			d.exec(rd)
			if len(d.starts) != 2 || d.starts[1].Prompt.Text != "then" {
				t.Fatalf("starts %+v, want the next message run", d.starts)
			}
			if n := len(runEvents(t, s, th, events.TypeRunFailed)); n != 1 {
				t.Fatalf("%d run_failed, want 1", n)
			}
			if d.stopped {
				t.Fatalf("the holder stopped: %v", d.stopErr)
			}
		})
	}
}

// A run_failed refused for its long reason is written again with the
// store's short reason; one refused with a short reason cannot be written
// at all: the holder stops, and the next claimant abandons the run.
func TestCore_Decide_refusedFailure(t *testing.T) {
	tests := []struct {
		name  string
		limit int // the store's; the core is told 1 MiB
		stops bool
	}{
		{"long reason", limit, false},
		{"no room even for a short one", 160, true},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			s := memstore.New(memstore.Config{MaxEventBytes: tc.limit})
			th := "unwritable"
			mustPost(t, s, th, "go")
			d := newDriver(t, s, th, thread.Config{Agent: "echo", MaxEventBytes: 1 << 20})
			if len(d.starts) != 1 {
				t.Fatalf("starts %+v, want one run", d.starts)
			}
			d.input(thread.RunFinished{RunID: d.starts[0].RunID, Err: errors.New(strings.Repeat("e", 3*limit))})
			failed := runEvents(t, s, th, events.TypeRunFailed)
			if tc.stops {
				if !d.stopped || !errors.Is(d.stopErr, events.ErrTooLarge) || len(failed) != 0 {
					t.Fatalf("stopped %v err %v, %d run_failed; want a stop naming the refusal", d.stopped, d.stopErr, len(failed))
				}
				return
			}
			if d.stopped || len(failed) != 1 {
				t.Fatalf("stopped %v (%v), %d run_failed; want the run failed and the holder on", d.stopped, d.stopErr, len(failed))
			}
			if r := failed[0].Event.GetRunFailed().GetReason(); !strings.Contains(r, "too large") || !strings.Contains(r, "4096") {
				t.Fatalf("reason %q does not name the refusal and the limit", r)
			}
			if next := d.post("next"); len(d.starts) != 2 || d.starts[1].Prompt.Seq != next {
				t.Fatalf("starts %+v, want the next message run", d.starts)
			}
		})
	}
}

// forge appends ev as a writer that is not the holder would: with valid
// checks, under the holder's claim, and a message id of its own.
func forge(t *testing.T, s events.Store, ev *eventspb.Event, chk events.Check, msgID string) uint64 {
	t.Helper()
	opts := []events.AppendOption{}
	if msgID != "" {
		opts = append(opts, events.WithMsgID(msgID))
	}
	ack, err := s.Append(context.Background(), ev, chk, opts...)
	if err != nil {
		t.Fatalf("forge %s: %v", events.TypeOf(ev), err)
	}
	return ack.Seq
}

func lastRunSeq(t *testing.T, s events.Store, th string) uint64 {
	t.Helper()
	n, err := s.LastSeq(context.Background(), th, events.KindRun)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Spec: the runtime acts only on its own writes (issue 10, item 5). Run
// events under the holder's claim that it did not write are reported and
// never acted on: they start no agent and neither end a run nor feed it in
// the core's view. Consuming ones are TestCore_Decide_forgedConsumersCount's.
func TestCore_Decide_forgedRunEventsIgnored(t *testing.T) {
	tests := []struct {
		name string
		// forge writes the forgery while the holder's run is active on
		// the first message ("go"); a second message "two" is pending.
		forge func(t *testing.T, s events.Store, d *driver, run string, two uint64)
		// check runs after the real run completed.
		check func(t *testing.T, s events.Store, d *driver)
	}{
		{"run_completed for the active run",
			func(t *testing.T, s events.Store, d *driver, run string, two uint64) {
				forge(t, s, events.NewRunCompleted(d.core.Claim(), d.core.Claim().Lease.Expires, run, "forged text"), events.ExpectLast(lastRunSeq(t, s, d.thread)), "x:1")
			},
			func(t *testing.T, s events.Store, d *driver) {
				// The view keeps no texts: it ended the run at the holder's
				// run_completed, not at the forged one.
				ends := runEvents(t, s, d.thread, events.TypeRunCompleted)
				if v := d.core.View(); len(ends) != 2 || v.Runs[len(v.Runs)-1].EndSeq != ends[1].Seq {
					t.Fatalf("the view took the forged end: %d ends, last run %+v", len(ends), v.Runs[len(v.Runs)-1])
				}
			}},
		{"run_failed with no claim for the active run",
			func(t *testing.T, s events.Store, d *driver, run string, two uint64) {
				ev := events.NewRunFailed(events.Claim{Thread: d.thread}, d.core.Claim().Lease.Expires, run, "forged")
				forge(t, s, ev, events.ExpectLast(lastRunSeq(t, s, d.thread)), "")
			}, nil},
		{"run_output under the holder's next message id",
			func(t *testing.T, s events.Store, d *driver, run string, two uint64) {
				// Message ids are guessable: the forger takes the one the
				// holder's next append will use, so the holder's own
				// append would be taken for a duplicate of the forgery.
				// Two appends so far: run_started and request_opened.
				id := d.thread + ":" + strconv.FormatUint(d.core.Claim().Seq, 10) + ":3"
				forge(t, s, events.NewRunOutput(d.core.Claim(), d.core.Claim().Lease.Expires, run, "forged"), events.ExpectLast(lastRunSeq(t, s, d.thread)), id)
				d.input(thread.RunOutput{RunID: run, Text: "real"})
			},
			func(t *testing.T, s events.Store, d *driver) {
				n := 0
				for _, e := range runEvents(t, s, d.thread, events.TypeRunOutput) {
					if e.Event.GetRunOutput().GetText() == "real" {
						n++
					}
				}
				if n != 1 {
					t.Fatalf("%d run_output \"real\" stored, want 1", n)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			s := memstore.New(memstore.Config{})
			th := "forged"
			mustPost(t, s, th, "go")
			d := newDriver(t, s, th, thread.Config{Agent: "echo", Steerable: false})
			run := d.starts[0].RunID
			d.input(thread.RunAsked{RunID: run, RequestID: run + "/q1", Question: "?"})
			two := mustPost(t, s, th, "two")
			tc.forge(t, s, d, run, two)
			d.exec(thread.Ready{}) // observe the post and the forgery
			if len(d.starts) != 1 {
				t.Fatalf("starts %+v: a forgery started a run", d.starts)
			}
			if v := d.core.View(); v.ActiveRun == nil || v.ActiveRun.ID != run {
				t.Fatalf("active run %+v, want the holder's %s still active", v.ActiveRun, run)
			}
			// The holder answers the open request itself, with its own write.
			if len(d.deliver) != 1 || d.deliver[0].Message.Seq != two || d.deliver[0].RequestID != run+"/q1" {
				t.Fatalf("deliveries %+v, want one answer: the holder's own", d.deliver)
			}
			if n := len(runEvents(t, s, th, events.TypeAnswerGiven)); n < 1 {
				t.Fatalf("no answer_given stored")
			}
			// The real run goes on and ends; its end is written.
			d.input(thread.RunOutput{RunID: run, Text: "still here"})
			d.input(thread.RunFinished{RunID: run, Output: "done"})
			v := d.core.View() // it keeps no texts: "done" is checked in the log
			if r := v.Runs[len(v.Runs)-1]; v.ActiveRun != nil || r.ID != run || r.Status != projections.RunCompleted ||
				r.EndSeq != runEvents(t, s, th, events.TypeRunCompleted)[len(runEvents(t, s, th, events.TypeRunCompleted))-1].Seq {
				t.Fatalf("after the real end: active %v, last run %+v", v.ActiveRun, r)
			}
			if tc.check != nil {
				tc.check(t, s, d)
			}
			if len(d.anomalies) != 1 {
				t.Fatalf("anomalies %+v, want the forgery reported once", d.anomalies)
			}
			if got := d.core.Anomalies(); len(got) != 1 || got[0].Seq == 0 {
				t.Fatalf("core anomalies %+v, want the forgery with its seq", got)
			}
			if d.stopped {
				t.Fatalf("the holder stopped: %v", d.stopErr)
			}
		})
	}
}

// A forged run_started can land between the claim's marker and the load
// of the history the claim starts from: it starts no agent there either,
// its message counts as consumed, and the holder abandons its run first.
func TestCore_New_forgeryInHistory(t *testing.T) {
	s := memstore.New(memstore.Config{})
	th := "early"
	m := mustPost(t, s, th, "go")
	c, _, err := events.AcquireClaim(context.Background(), s, th, "h", 10*time.Second, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	forge(t, s, events.NewRunStarted(c, time.Now(), "evil", m, "evil"), events.Fenced(c), "x:1")
	hist, err := s.Load(context.Background(), th, 1)
	if err != nil {
		t.Fatal(err)
	}
	core := thread.New(thread.Config{Agent: "echo"}, c, hist)
	rd := core.Start()
	if len(rd.Start) != 0 || len(rd.Anomalies) != 1 || rd.Anomalies[0].Type != events.TypeRunStarted {
		t.Fatalf("start %+v anomalies %+v; want no run and the forgery reported", rd.Start, rd.Anomalies)
	}
	if v := core.View(); len(v.Pending()) != 0 {
		t.Fatalf("the view did not count the forged run's prompt as consumed: pending %+v", v.Pending())
	}
	if rd.Append == nil || events.TypeOf(rd.Append.Event) != events.TypeRunAbandoned || rd.Append.Event.GetRunAbandoned().GetRunId() != "evil" {
		t.Fatalf("append %+v, want the holder's run_abandoned of the forged run", rd.Append)
	}
}
