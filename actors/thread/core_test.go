package thread_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/thread"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
)

// driver carries out a core's Readys against a memstore in one goroutine,
// as the actor shell does, and records the effects.
type driver struct {
	t       *testing.T
	s       events.Store
	core    *thread.Core
	thread  string
	starts  []thread.StartRun
	deliver []thread.Deliver
	steered []string
	cancels []string
	stopped bool
	stopErr error
	release bool
	why     string
	rel     thread.Release
	pending []thread.Input // inputs to feed after the current Ready
	seen    uint64         // last sequence queued as Observed

	anomalies []thread.Anomaly
}

func newDriver(t *testing.T, s events.Store, th string, cfg thread.Config) *driver {
	t.Helper()
	c, hist, err := events.AcquireClaim(context.Background(), s, th, "h-"+th, eventstest.TTL, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	d := &driver{t: t, s: s, thread: th, core: thread.New(cfg, c, hist)}
	d.seen = d.core.View().LastSeq
	d.exec(d.core.Start())
	return d
}

// exec carries out rd, then feeds every resulting input until quiet.
func (d *driver) exec(rd thread.Ready) {
	d.t.Helper()
	for step := 0; ; step++ {
		if step > 10_000 {
			d.t.Fatalf("the core makes no progress: last ready %+v", rd)
		}
		d.anomalies = append(d.anomalies, rd.Anomalies...)
		d.cancels = append(d.cancels, rd.Cancel...)
		d.starts = append(d.starts, rd.Start...)
		d.deliver = append(d.deliver, rd.Deliver...)
		d.steered = append(d.steered, rd.Steered...)
		if rd.Append != nil {
			ev := rd.Append.Event
			ack, err := d.s.Append(context.Background(), ev, rd.Append.Check, events.WithMsgID(rd.Append.MsgID))
			d.pending = append(d.pending, thread.AppendDone{Ack: ack, Err: err})
		}
		if rd.Sync {
			last, err := events.ThreadLastSeq(context.Background(), d.s, d.thread)
			if err != nil {
				d.t.Fatalf("sync: %v", err)
			}
			d.pending = append(d.pending, thread.Synced{LastSeq: last})
		}
		if rd.Stop {
			d.stopped, d.stopErr = true, rd.StopErr
			if rd.Release != nil {
				d.release, d.why, d.rel = true, rd.Release.Reason, *rd.Release
			}
		}
		d.observeNew()
		if len(d.pending) == 0 {
			return
		}
		in := d.pending[0]
		d.pending = d.pending[1:]
		var err error
		rd, err = d.core.Decide(in)
		if err != nil {
			d.t.Fatalf("decide %T: %v", in, err)
		}
	}
}

// observeNew queues the thread's events the core has not seen.
func (d *driver) observeNew() {
	envs, err := d.s.Load(context.Background(), d.thread, d.seen+1)
	if err != nil {
		d.t.Fatal(err)
	}
	for _, e := range envs {
		d.seen = e.Seq
		d.pending = append(d.pending, thread.Observed{Env: e})
	}
}

func (d *driver) input(in thread.Input) {
	d.t.Helper()
	rd, err := d.core.Decide(in)
	if err != nil {
		d.t.Fatalf("decide %T: %v", in, err)
	}
	d.exec(rd)
}

func (d *driver) post(text string) uint64 {
	d.t.Helper()
	ack, err := d.s.Post(context.Background(), d.thread, &eventspb.MessagePosted{Text: text})
	if err != nil {
		d.t.Fatal(err)
	}
	d.exec(thread.Ready{})
	return ack.Seq
}

func types(t *testing.T, s events.Store, th string) []string {
	envs, err := s.Load(context.Background(), th, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range envs {
		out = append(out, string(e.Type))
	}
	return out
}

func wantTypes(t *testing.T, s events.Store, th string, want ...string) {
	t.Helper()
	if got := types(t, s, th); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("log:\n got %v\nwant %v", got, want)
	}
}

func TestCore_Decide_runLifecycle(t *testing.T) {
	s := memstore.New(memstore.Config{})
	th := "life"
	m := mustPost(t, s, th, "hello")
	d := newDriver(t, s, th, thread.Config{Agent: "echo"})
	if len(d.starts) != 1 || d.starts[0].Prompt.Seq != m || d.starts[0].Prompt.Text != "hello" {
		t.Fatalf("starts %+v, want one run on %d", d.starts, m)
	}
	run := d.starts[0].RunID
	if d.starts[0].Token.ClaimSeq != d.core.Claim().Seq {
		t.Fatalf("token %+v lacks the claim seq %d", d.starts[0].Token, d.core.Claim().Seq)
	}
	d.input(thread.RunOutput{RunID: run, Text: "partial"})
	d.input(thread.RunFinished{RunID: run, Output: "done"})
	wantTypes(t, s, th, "message_posted", "thread_claimed", "run_started", "run_output", "run_completed")
	if v := d.core.View(); v.ActiveRun != nil || len(v.Pending()) != 0 {
		t.Fatalf("view after run: active %v pending %d", v.ActiveRun, len(v.Pending()))
	}
	// Messages are consumed oldest first, one run at a time.
	a, b := d.post("a"), d.post("b")
	if len(d.starts) != 2 || d.starts[1].Prompt.Seq != a {
		t.Fatalf("second run on %+v, want %d", d.starts[1:], a)
	}
	d.input(thread.RunFinished{RunID: d.starts[1].RunID, Err: errors.New("boom")})
	if len(d.starts) != 3 || d.starts[2].Prompt.Seq != b {
		t.Fatalf("third run on %+v, want %d", d.starts[2:], b)
	}
	wantTypes(t, s, th, "message_posted", "thread_claimed", "run_started", "run_output", "run_completed",
		"message_posted", "run_started", "message_posted", "run_failed", "run_started")
}

func mustPost(t *testing.T, s events.Store, th, text string) uint64 {
	t.Helper()
	ack, err := s.Post(context.Background(), th, &eventspb.MessagePosted{Text: text})
	if err != nil {
		t.Fatal(err)
	}
	return ack.Seq
}

func TestCore_Decide_takeoverAbandons(t *testing.T) {
	clock := eventstest.NewClock(0)
	log := memstore.NewLog()
	a := log.Open(memstore.Config{Now: clock.Now})
	th := "takeover"
	mustPost(t, a, th, "one")
	mustPost(t, a, th, "two")
	d1 := newDriver(t, a, th, thread.Config{Agent: "echo"})
	if len(d1.starts) != 1 {
		t.Fatal("first holder started no run")
	}
	clock.Advance(2 * eventstest.TTL)
	d2 := newDriver(t, log.Open(memstore.Config{Now: clock.Now}), th, thread.Config{Agent: "echo"})
	wantTypes(t, a, th, "message_posted", "message_posted", "thread_claimed", "run_started",
		"thread_claimed", "run_abandoned", "run_started")
	if len(d2.starts) != 1 || d2.starts[0].Prompt.Text != "two" {
		t.Fatalf("new holder's runs %+v, want one on the second message", d2.starts)
	}
	// The old holder's run end is refused; it learns it lost the claim.
	d1.input(thread.RunFinished{RunID: d1.starts[0].RunID, Output: "late"})
	if !d1.stopped || !errors.Is(d1.stopErr, events.ErrThreadBusy) {
		t.Fatalf("old holder: stopped=%v err=%v, want stopped with ErrThreadBusy", d1.stopped, d1.stopErr)
	}
	if n := strings.Count(strings.Join(types(t, a, th), " "), "run_completed"); n != 0 {
		t.Fatalf("%d run_completed written by the old holder", n)
	}
}

// Spec: StartFenced. I4: a refused start consumes nothing and stops.
func TestCore_Decide_refusedStartStops(t *testing.T) {
	clock := eventstest.NewClock(0)
	log := memstore.NewLog()
	a := log.Open(memstore.Config{Now: clock.Now})
	th := "refused"
	c, hist, err := events.AcquireClaim(context.Background(), a, th, "A", eventstest.TTL, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	core := thread.New(thread.Config{Agent: "echo"}, c, hist)
	mustPost(t, a, th, "m")
	envs, _ := a.Load(context.Background(), th, core.View().LastSeq+1)
	rd, _ := core.Decide(thread.Observed{Env: envs[0]})
	if rd.Append == nil || events.TypeOf(rd.Append.Event) != events.TypeRunStarted || rd.Append.Check.Mode != events.CheckFence {
		t.Fatalf("ready %+v, want a fenced run_started", rd)
	}
	// Another claim lands before the append.
	clock.Advance(2 * eventstest.TTL)
	if _, _, err := events.AcquireClaim(context.Background(), log.Open(memstore.Config{Now: clock.Now}), th, "B", eventstest.TTL, clock.Now()); err != nil {
		t.Fatal(err)
	}
	_, err = a.Append(context.Background(), rd.Append.Event, rd.Append.Check)
	rd, _ = core.Decide(thread.AppendDone{Err: err})
	if !rd.Stop || !errors.Is(rd.StopErr, events.ErrThreadBusy) || len(rd.Start) != 0 {
		t.Fatalf("ready after refusal %+v, want stop with ErrThreadBusy and no run", rd)
	}
	if rd, _ := core.Decide(thread.Tick{}); !rd.Empty() {
		t.Fatalf("a stopped core still acts: %+v", rd)
	}
}

func TestCore_Decide_requestAnswered(t *testing.T) {
	s := memstore.New(memstore.Config{})
	th := "ask"
	mustPost(t, s, th, "ask: name?")
	d := newDriver(t, s, th, thread.Config{Agent: "echo"})
	run := d.starts[0].RunID
	d.input(thread.RunAsked{RunID: run, RequestID: run + "/q1", Question: "name?"})
	ans := d.post("bob")
	if len(d.deliver) != 1 || d.deliver[0].RequestID != run+"/q1" || d.deliver[0].Message.Seq != ans {
		t.Fatalf("deliveries %+v, want the answer %d to %s/q1", d.deliver, ans, run)
	}
	d.input(thread.RunFinished{RunID: run, Output: "hi bob"})
	wantTypes(t, s, th, "message_posted", "thread_claimed", "run_started", "request_opened",
		"message_posted", "answer_given", "run_completed")
}

func TestCore_Decide_steering(t *testing.T) {
	for _, steer := range []bool{true, false} {
		s := memstore.New(memstore.Config{})
		th := "steer"
		mustPost(t, s, th, "go")
		d := newDriver(t, s, th, thread.Config{Agent: "echo", Steerable: steer})
		run := d.starts[0].RunID
		m := d.post("left")
		if len(d.deliver) != 0 {
			t.Fatalf("steerable %v: deliveries %+v before the run asked", steer, d.deliver)
		}
		d.input(thread.RunSteer{RunID: run})
		if !slices.Equal(d.steered, []string{run}) {
			t.Fatalf("steerable %v: asks answered %q, want %s once", steer, d.steered, run)
		}
		if steer {
			if len(d.deliver) != 1 || d.deliver[0].RequestID != "" || d.deliver[0].Message.Seq != m {
				t.Fatalf("steerable: deliveries %+v, want steering %d", d.deliver, m)
			}
			wantTypes(t, s, th, "message_posted", "thread_claimed", "run_started", "message_posted", "steering_given")
			continue
		}
		if len(d.deliver) != 0 {
			t.Fatalf("not steerable: deliveries %+v, want none", d.deliver)
		}
		d.input(thread.RunFinished{RunID: run})
		if len(d.starts) != 2 || d.starts[1].Prompt.Seq != m {
			t.Fatalf("not steerable: the message should prompt the next run, starts %+v", d.starts)
		}
	}
}

// Steering is pulled: a message posted during a run is consumed as steering
// only while the run asks. A run that ends without asking leaves it for the
// next run, so no message is consumed by a run whose agent never read it.
func TestCore_Decide_steeringOnlyWhenAsked(t *testing.T) {
	s := memstore.New(memstore.Config{})
	th := "unasked"
	mustPost(t, s, th, "go")
	d := newDriver(t, s, th, thread.Config{Agent: "echo", Steerable: true})
	run := d.starts[0].RunID
	m := d.post("left")
	d.input(thread.RunFinished{RunID: run, Output: "done"})
	if len(d.deliver) != 0 {
		t.Fatalf("deliveries %+v to a run that never asked", d.deliver)
	}
	if len(d.starts) != 2 || d.starts[1].Prompt.Seq != m {
		t.Fatalf("the message should prompt the next run, starts %+v", d.starts)
	}
	wantTypes(t, s, th, "message_posted", "thread_claimed", "run_started", "message_posted", "run_completed", "run_started")
}

// An ask with nothing pending is answered at once, writing nothing; each
// ask is answered once, in order, even when a second comes while the first
// is still being given its steering.
func TestCore_Decide_steerAsks(t *testing.T) {
	s := memstore.New(memstore.Config{})
	th := "asks"
	mustPost(t, s, th, "go")
	d := newDriver(t, s, th, thread.Config{Agent: "echo", Steerable: true})
	run := d.starts[0].RunID
	d.input(thread.RunSteer{RunID: run})
	if !slices.Equal(d.steered, []string{run}) || len(d.deliver) != 0 {
		t.Fatalf("ask with nothing pending: answered %q, deliveries %+v", d.steered, d.deliver)
	}
	wantTypes(t, s, th, "message_posted", "thread_claimed", "run_started")

	m := d.post("left")
	rd1, err := d.core.Decide(thread.RunSteer{RunID: run})
	if err != nil || rd1.Append == nil || len(rd1.Steered) != 0 {
		t.Fatalf("first ask: ready %+v err %v, want a steering_given and no answer yet", rd1, err)
	}
	rd2, err := d.core.Decide(thread.RunSteer{RunID: run})
	if err != nil || !slices.Equal(rd2.Steered, []string{run}) || rd2.Append != nil {
		t.Fatalf("second ask: ready %+v err %v, want the first ask answered", rd2, err)
	}
	d.exec(rd1)
	if !slices.Equal(d.steered, []string{run, run}) {
		t.Fatalf("answers %q besides the second ask's, want the first and the third ask's", d.steered)
	}
	if len(d.deliver) != 1 || d.deliver[0].Message.Seq != m {
		t.Fatalf("deliveries %+v, want %d once", d.deliver, m)
	}
	if _, err := d.core.Decide(thread.RunSteer{RunID: "run-other"}); err == nil {
		t.Fatal("an ask of a run this claim does not hold was taken")
	}
}

// One ask takes at most 64 messages, so a flood of posts cannot hold an
// agent in Steer; the next ask takes the rest.
func TestCore_Decide_steerAskBounded(t *testing.T) {
	s := memstore.New(memstore.Config{})
	th := "flood"
	mustPost(t, s, th, "go")
	d := newDriver(t, s, th, thread.Config{Agent: "echo", Steerable: true})
	run := d.starts[0].RunID
	for i := range 70 {
		mustPost(t, s, th, fmt.Sprintf("m%d", i))
	}
	d.observeNew()
	d.input(thread.Tick{})
	d.input(thread.RunSteer{RunID: run})
	if len(d.deliver) != 64 || len(d.steered) != 1 {
		t.Fatalf("first ask: %d delivered, %d answers; want 64 and 1", len(d.deliver), len(d.steered))
	}
	d.input(thread.RunSteer{RunID: run})
	if len(d.deliver) != 70 || len(d.steered) != 2 {
		t.Fatalf("second ask: %d delivered in all, %d answers; want 70 and 2", len(d.deliver), len(d.steered))
	}
}

func TestCore_Decide_conflictResyncs(t *testing.T) {
	log := memstore.NewLog()
	s := log.Open(memstore.Config{})
	th := "conflict"
	mustPost(t, s, th, "go")
	d := newDriver(t, s, th, thread.Config{Agent: "echo"})
	run := d.starts[0].RunID
	// A forged write moves the run subject under the holder.
	log.PublishRaw("threads."+th+".run", nil, []byte("junk"))
	d.input(thread.RunFinished{RunID: run, Output: "ok"})
	wantTypes(t, s, th, "message_posted", "thread_claimed", "run_started", "", "run_completed")
	if d.stopped {
		t.Fatalf("holder stopped on a conflict it could retry: %v", d.stopErr)
	}
}

// startCore posts to th, claims it and starts a core on it, which plans
// the message's run_started, returned.
func startCore(t *testing.T, s events.Store, th string) (*thread.Core, *thread.Append) {
	t.Helper()
	mustPost(t, s, th, "go")
	c, hist, err := events.AcquireClaim(context.Background(), s, th, "h", eventstest.TTL, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	core := thread.New(thread.Config{Agent: "echo"}, c, hist)
	first := core.Start().Append
	if first == nil || events.TypeOf(first.Event) != events.TypeRunStarted {
		t.Fatalf("want a run_started, got %+v", first)
	}
	return core, first
}

// An append whose outcome is unknown may land after any read that missed
// it (a replicated stream's proposal that the next leader commits). The
// core reads the log, and when the append is not there it sends it again,
// unchanged, until the store gives a verdict; it does not plan past it.
// Replanning from the read alone would let a draining holder release its
// claim while the run_started it sent lands after the read: a run left
// active under a released claim.
func TestCore_Decide_unknownOutcomeResent(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.Config{})
	th := "unknown"
	core, first := startCore(t, s, th)
	decide := func(in thread.Input) thread.Ready {
		t.Helper()
		rd, err := core.Decide(in)
		if err != nil {
			t.Fatalf("decide %T: %v", in, err)
		}
		return rd
	}
	decide(thread.Drain{Handover: true}) // the partition moved meanwhile
	unknown := fmt.Errorf("%w: no reply in time; outcome unknown", events.ErrUnavailable)
	// The sync reads the log before the first send lands.
	resend := func(retry int) *thread.Append {
		t.Helper()
		if rd := decide(thread.AppendDone{Err: unknown}); !rd.Sync || rd.Append != nil || rd.Release != nil || rd.Stop {
			t.Fatalf("after an unknown outcome: %+v, want a sync and nothing else", rd)
		}
		rd := decide(thread.Synced{LastSeq: core.View().LastSeq})
		again := rd.Append
		if again == nil || rd.Sync || rd.Release != nil || rd.Stop {
			t.Fatalf("after the sync: %+v, want the append sent again and nothing else", rd)
		}
		if again.MsgID != first.MsgID || again.Check != first.Check || events.TypeOf(again.Event) != events.TypeRunStarted || again.Retry != retry {
			t.Fatalf("resent %+v, want the first (%s, %+v) unchanged, retry %d", again, first.MsgID, first.Check, retry)
		}
		return again
	}
	resend(1)
	again := resend(2)
	// The first send lands late; the resend is its duplicate.
	if _, err := s.Append(ctx, first.Event, first.Check, events.WithMsgID(first.MsgID)); err != nil {
		t.Fatal(err)
	}
	ack, err := s.Append(ctx, again.Event, again.Check, events.WithMsgID(again.MsgID))
	if err != nil || !ack.Duplicate {
		t.Fatalf("the resend: %+v, %v; want a duplicate ack", ack, err)
	}
	d := &driver{t: t, s: s, thread: th, core: core, seen: core.View().LastSeq}
	d.exec(decide(thread.AppendDone{Ack: ack}))
	if len(d.starts) != 1 || d.release {
		t.Fatalf("starts %d, release %v: the run that landed must start, and the claim stay until it ends", len(d.starts), d.release)
	}
	d.input(thread.RunFinished{RunID: d.starts[0].RunID, Output: "ok"})
	if !d.release {
		t.Fatal("not released once the run ended")
	}
	wantTypes(t, s, th, "message_posted", "thread_claimed", "run_started", "run_completed")
}

// An append whose outcome was unknown and that the sync finds landed is
// not sent again: past the stream's deduplication window a resend could
// land a second time.
func TestCore_Decide_unknownOutcomeLandedNotResent(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.Config{})
	th := "landed"
	core, first := startCore(t, s, th)
	if _, err := s.Append(ctx, first.Event, first.Check, events.WithMsgID(first.MsgID)); err != nil {
		t.Fatal(err)
	}
	rd, err := core.Decide(thread.AppendDone{Err: fmt.Errorf("%w: ack lost", events.ErrUnavailable)})
	if err != nil || !rd.Sync {
		t.Fatalf("after an unknown outcome: %+v, %v; want a sync", rd, err)
	}
	last, err := events.ThreadLastSeq(ctx, s, th)
	if err != nil {
		t.Fatal(err)
	}
	if rd, err = core.Decide(thread.Synced{LastSeq: last}); err != nil || rd.Append != nil {
		t.Fatalf("synced before the view holds the log: %+v, %v; want nothing yet", rd, err)
	}
	envs, err := s.Load(ctx, th, core.View().LastSeq+1)
	if err != nil {
		t.Fatal(err)
	}
	starts := 0
	for _, e := range envs {
		rd, err := core.Decide(thread.Observed{Env: e})
		if err != nil {
			t.Fatal(err)
		}
		starts += len(rd.Start)
		if a := rd.Append; a != nil && a.MsgID == first.MsgID {
			t.Fatalf("the append that landed was sent again: %+v", a)
		}
	}
	if starts != 1 {
		t.Fatalf("%d runs started, want the one that landed", starts)
	}
}

// A refused compare-and-set is a verdict: nothing was written, and the
// run subject holds an event the writer had not read. The core catches up
// with the log and plans again from the event it then holds.
func TestCore_Decide_refusedResyncs(t *testing.T) {
	for _, e := range []error{events.ErrConflict, events.ErrRunMoved} {
		t.Run(e.Error(), func(t *testing.T) {
			ctx := context.Background()
			s := memstore.New(memstore.Config{})
			core, first := startCore(t, s, "refused")
			stray := refusedBy(t, s, core, first)
			rd, err := core.Decide(thread.AppendDone{Err: fmt.Errorf("refused: %w", e)})
			if err != nil || !rd.Sync || rd.Append != nil {
				t.Fatalf("%+v, %v; want a sync", rd, err)
			}
			last, err := events.ThreadLastSeq(ctx, s, "refused")
			if err != nil {
				t.Fatal(err)
			}
			if rd, err = core.Decide(thread.Synced{LastSeq: last}); err != nil || rd.Append != nil || rd.Stop {
				t.Fatalf("synced before the view holds the log: %+v, %v; want nothing yet", rd, err)
			}
			rd, err = core.Decide(thread.Observed{Env: stray})
			if err != nil || rd.Stop || rd.Append == nil {
				t.Fatalf("after the view caught up: %+v, %v; want the next append planned", rd, err)
			}
			if rd.Append.Check == first.Check {
				t.Fatalf("planned again with the refused check %+v", first.Check)
			}
		})
	}
}

// A view that misses a stored event (its events reached it with one left
// out) is found by the compare-and-set the store refuses: once the view
// holds everything up to the log read after the refusal and still ends its
// run subject where the refused write expected, it lacks an event. The core
// stops for a fresh claim rather than send the refused write again and
// again, or release from a view that may hide an active run.
func TestCore_Decide_refusedWithViewHoleStops(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.Config{})
	th := "hole"
	core, first := startCore(t, s, th)
	refusedBy(t, s, core, first)
	later := mustPost(t, s, th, "later")
	rd, err := core.Decide(thread.AppendDone{Err: fmt.Errorf("refused: %w", events.ErrRunMoved)})
	if err != nil || !rd.Sync {
		t.Fatalf("%+v, %v; want a sync", rd, err)
	}
	// The run-subject event never reaches the core; the post after it does.
	envs, err := s.Load(ctx, th, later)
	if err != nil || len(envs) != 1 {
		t.Fatalf("load the post: %v, %v", envs, err)
	}
	if _, err := core.Decide(thread.Observed{Env: envs[0]}); err != nil {
		t.Fatal(err)
	}
	rd, err = core.Decide(thread.Synced{LastSeq: later})
	if err != nil {
		t.Fatal(err)
	}
	if !rd.Stop || rd.Append != nil || rd.Release != nil {
		t.Fatalf("a view missing a stored event: %+v; want a stop, with nothing written and no release", rd)
	}
	if len(rd.Anomalies) != 1 || !strings.Contains(rd.Anomalies[0].Reason, "lacks a stored event") {
		t.Fatalf("anomalies %+v, want the hole named", rd.Anomalies)
	}
}

// refusedBy stores, under core's claim, a run-subject event core has not
// read, so that first, core's pending append, is refused; it returns it.
func refusedBy(t *testing.T, s events.Store, core *thread.Core, first *thread.Append) events.Envelope {
	t.Helper()
	ctx := context.Background()
	c := core.Claim()
	ev := events.NewRunAbandoned(c, time.Now(), "stray-run", c.Seq, "written by another process of the holder")
	ack, err := s.Append(ctx, ev, events.FencedGuarded(c, core.View().LastRunSubjectSeq))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, first.Event, first.Check, events.WithMsgID(first.MsgID)); !errors.Is(err, events.ErrRunMoved) && !errors.Is(err, events.ErrConflict) {
		t.Fatalf("the core's append after the stray one: %v; want it refused", err)
	}
	envs, err := s.Load(ctx, c.Thread, ack.Seq)
	if err != nil || len(envs) == 0 {
		t.Fatalf("load the stray event: %v, %v", envs, err)
	}
	return envs[0]
}

func TestCore_Decide_idleRelease(t *testing.T) {
	s := memstore.New(memstore.Config{})
	th := "idle"
	mustPost(t, s, th, "go")
	d := newDriver(t, s, th, thread.Config{Agent: "echo", IdleTicks: 2})
	d.input(thread.Tick{})
	d.input(thread.Tick{})
	if d.stopped {
		t.Fatal("released with a run active")
	}
	d.input(thread.RunFinished{RunID: d.starts[0].RunID})
	d.input(thread.Tick{})
	d.input(thread.Tick{})
	if !d.stopped || !d.release || d.why != "idle" {
		t.Fatalf("idle: stopped=%v release=%v why=%q, want both, idle", d.stopped, d.release, d.why)
	}
	if want := (thread.Release{Reason: "idle", LastPosted: 1, RunSeq: runLast(t, s, th)}); d.rel != want {
		t.Fatalf("idle release %+v, want %+v: the lease goes, nothing pending", d.rel, want)
	}
}

// runLast is th's run subject's last sequence: a release's RunSeq, the
// compare-and-set of a release under RUNFENCE.
func runLast(t *testing.T, s events.LastSeqReader, th string) uint64 {
	t.Helper()
	n, err := s.LastSeq(t.Context(), th, events.KindRun)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The release decision is the core's: a shutdown that leaves messages
// pending keeps the lease, so the session's close hands the thread on, and
// says the newest post it saw, so a later one is looked at again.
func TestCore_Decide_shutdownKeepsLeaseWhenPending(t *testing.T) {
	for _, more := range []bool{false, true} {
		s := memstore.New(memstore.Config{})
		th := "keep"
		mustPost(t, s, th, "go")
		last := uint64(1)
		if more {
			last = mustPost(t, s, th, "later")
		}
		d := newDriver(t, s, th, thread.Config{Agent: "echo"})
		d.input(thread.Shutdown{})
		d.input(thread.RunFinished{RunID: d.starts[0].RunID, Err: context.Canceled})
		want := thread.Release{Reason: "shutdown", KeepLease: more, Pending: more, LastPosted: last, RunSeq: runLast(t, s, th)}
		if !d.stopped || d.rel != want {
			t.Fatalf("pending=%v: stopped=%v release %+v, want %+v", more, d.stopped, d.rel, want)
		}
	}
}

// A handover (the partition moved; the runner's session lives on) gives
// the lease up with pending messages too: no session close would, and the
// partition's new owner could never claim the thread.
func TestCore_Decide_handoverReleasesLease(t *testing.T) {
	s := memstore.New(memstore.Config{})
	th := "handover"
	mustPost(t, s, th, "go")
	last := mustPost(t, s, th, "later")
	d := newDriver(t, s, th, thread.Config{Agent: "echo"})
	d.input(thread.Drain{Handover: true})
	d.input(thread.Shutdown{}) // the grace ran out: handover still
	d.input(thread.RunFinished{RunID: d.starts[0].RunID, Err: context.Canceled})
	want := thread.Release{Reason: "shutdown", Pending: true, LastPosted: last, RunSeq: runLast(t, s, th)}
	if !d.stopped || d.rel != want {
		t.Fatalf("stopped=%v release %+v, want %+v", d.stopped, d.rel, want)
	}
}

func TestCore_Decide_shutdownCancelsAndRecords(t *testing.T) {
	s := memstore.New(memstore.Config{})
	th := "shutdown"
	mustPost(t, s, th, "go")
	mustPost(t, s, th, "later")
	d := newDriver(t, s, th, thread.Config{Agent: "echo"})
	run := d.starts[0].RunID
	d.input(thread.Shutdown{})
	if len(d.cancels) != 1 || d.cancels[0] != run {
		t.Fatalf("cancels %v, want %s", d.cancels, run)
	}
	d.input(thread.RunFinished{RunID: run, Err: context.Canceled})
	if !d.stopped || !d.release || d.why != "shutdown" || len(d.starts) != 1 {
		t.Fatalf("shutdown: stopped=%v release=%v starts=%d; want a release and no new run", d.stopped, d.release, len(d.starts))
	}
	wantTypes(t, s, th, "message_posted", "message_posted", "thread_claimed", "run_started", "run_failed")
}

func TestCore_Decide_rejectsForeignRun(t *testing.T) {
	s := memstore.New(memstore.Config{})
	d := newDriver(t, s, "reject", thread.Config{})
	_, err := d.core.Decide(thread.RunOutput{RunID: "nope", Text: "x"})
	var rej *thread.RejectError
	if !errors.As(err, &rej) {
		t.Fatalf("output of an unknown run: %v, want *RejectError", err)
	}
}

// The core is pure: it imports neither nats.go nor protoactor, nor os/exec
// (agents that run programs live in actors/agent/exec).
func TestCore_deps_pure(t *testing.T) {
	testkit.NoDeps(t, "github.com/artifactr/artifactr/actors/thread", "github.com/nats-io/", "github.com/asynkron/protoactor-go/", "os/exec")
}

// fold returns the whole fold of the thread's log: the core keeps a
// compact view, without its ended runs and consumed messages.
func (d *driver) fold() *projections.Thread {
	d.t.Helper()
	envs, err := d.s.Load(context.Background(), d.thread, 1)
	if err != nil {
		d.t.Fatal(err)
	}
	return projections.Fold(d.thread, envs)
}

// history returns start i's history and conversation, read from the log as
// the shell reads them.
func (d *driver) history(i int) (hist, conv []agent.Message) {
	d.t.Helper()
	sr := d.starts[i]
	from := thread.HistoryStart(sr)
	if from == 0 {
		return nil, nil
	}
	envs, err := d.s.Load(context.Background(), d.thread, from)
	if err != nil {
		d.t.Fatal(err)
	}
	return thread.HistoryFrom(d.thread, sr, envs)
}
