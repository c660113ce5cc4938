package thread_test

import (
	"context"
	"errors"
	"testing"

	"github.com/artifactr/artifactr/actors/thread"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/memstore"
)

// A holder that observes a newer claim's marker stops (I4), on either
// layout. Under RUNFENCE the marker is on the run subject, after the
// holder's own: the core took it for a foreign run event, logged an
// anomaly and went on, its K (the view's run-subject sequence) past the
// newer marker, so its next consuming write landed under the newer claim
// (test/sim/runners seed 1531 on the run layout: FenceNewestClaim, a
// run_abandoned of the new holder's run under the old claim).
func TestCore_Decide_observedNewerClaimStops(t *testing.T) {
	for _, runFence := range []bool{false, true} {
		t.Run(map[bool]string{false: "claim", true: "run"}[runFence], func(t *testing.T) {
			ctx := context.Background()
			clock := eventstest.NewClock(0)
			log := memstore.NewLog()
			cfg := memstore.Config{Now: clock.Now, Subjects: events.Subjects{RunFence: runFence}}
			a := log.Open(cfg)
			th := "observed"
			mustPost(t, a, th, "m")
			c, hist, err := events.AcquireClaim(ctx, a, th, "A", eventstest.TTL, clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			core := thread.New(thread.Config{Agent: "echo"}, c, hist)
			rd := core.Start()
			if rd.Append == nil || events.TypeOf(rd.Append.Event) != events.TypeRunStarted {
				t.Fatalf("start %+v, want a run_started", rd)
			}
			ack, err := a.Append(ctx, rd.Append.Event, rd.Append.Check, events.WithMsgID(rd.Append.MsgID))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := core.Decide(thread.AppendDone{Ack: ack}); err != nil {
				t.Fatal(err)
			}
			envs, _ := a.Load(ctx, th, core.View().LastSeq+1)
			for _, env := range envs {
				if _, err := core.Decide(thread.Observed{Env: env}); err != nil {
					t.Fatal(err)
				}
			}
			// The lease lapses; B claims.
			clock.Advance(2 * eventstest.TTL)
			b, _, err := events.AcquireClaim(ctx, log.Open(cfg), th, "B", eventstest.TTL, clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			envs, _ = a.Load(ctx, th, core.View().LastSeq+1)
			if len(envs) != 1 || envs[0].Seq != b.Seq || envs[0].Type != events.TypeThreadClaimed {
				t.Fatalf("after B's claim %+v, want its marker at %d", envs, b.Seq)
			}
			rd, err = core.Decide(thread.Observed{Env: envs[0]})
			if err != nil {
				t.Fatal(err)
			}
			if !rd.Stop || !errors.Is(rd.StopErr, events.ErrThreadBusy) || len(rd.Anomalies) != 0 || rd.Append != nil {
				t.Fatalf("A observes B's marker on the %s subject: ready %+v, want a stop with ErrThreadBusy, no anomaly, no write", envs[0].Kind, rd)
			}
			if len(rd.Cancel) != 1 {
				t.Fatalf("A's run is not cancelled: %+v", rd.Cancel)
			}
		})
	}
}

// Under RUNFENCE (events.Subjects.RunFence) another holder's claim marker
// and its release are on the run subject, after this holder's marker. The
// core must take the marker for what it is, a newer claim, and stop: it is
// no foreign run event to count and ignore. Counting it would move the
// view's LastRunSubjectSeq, the holder's K, past the newer claim, and the
// holder's next consuming write, one compare-and-set expecting K, would
// land under a claim that is no longer the newest (found by
// TestChaos_forgerRunFence, seed 384406358784: run_started at 502 under
// claim 378 expecting 499, after r2.1's claim at 489 and its release at 499).
func TestCore_Decide_runFenceForeignMarkerStops(t *testing.T) {
	for _, released := range []bool{false, true} {
		clock := eventstest.NewClock(0)
		log := memstore.NewLog()
		cfg := memstore.Config{Now: clock.Now, Subjects: events.Subjects{RunFence: true}}
		a := log.Open(cfg)
		th := "rf-marker"
		ctx := context.Background()
		c, hist, err := events.AcquireClaim(ctx, a, th, "A", eventstest.TTL, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		core := thread.New(thread.Config{Agent: "echo"}, c, hist)
		if rd := core.Start(); rd.Append != nil || rd.Stop {
			t.Fatalf("start: %+v, want nothing to do", rd)
		}
		// B takes the thread over (A's lease lapsed), and maybe lets it go.
		clock.Advance(2 * eventstest.TTL)
		b := log.Open(cfg)
		cb, _, err := events.AcquireClaim(ctx, b, th, "B", eventstest.TTL, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if cb.Seq <= c.Seq {
			t.Fatalf("B's claim %d not after A's %d", cb.Seq, c.Seq)
		}
		if released {
			if err := events.ReleaseClaimAt(ctx, b, cb, cb.Seq, "idle", clock.Now()); err != nil {
				t.Fatal(err)
			}
		}
		mustPost(t, a, th, "m")
		envs, err := a.Load(ctx, th, core.View().LastSeq+1)
		if err != nil {
			t.Fatal(err)
		}
		if envs[0].Type != events.TypeThreadClaimed || envs[0].Kind != events.KindRun {
			t.Fatalf("first event after A's view: %s on %s, want B's thread_claimed on the run subject", envs[0].Type, envs[0].Kind)
		}
		stopped := false
		for _, e := range envs {
			rd, err := core.Decide(thread.Observed{Env: e})
			if err != nil {
				t.Fatal(err)
			}
			if rd.Append != nil {
				ack, err := a.Append(ctx, rd.Append.Event, rd.Append.Check, events.WithMsgID(rd.Append.MsgID))
				t.Fatalf("released=%v: after B's claim at %d A appends %s expecting run seq %d (err %v, ack %d): a write under an old claim",
					released, cb.Seq, events.TypeOf(rd.Append.Event), rd.Append.Check.RunSeq, err, ack.Seq)
			}
			if rd.Stop {
				if !errors.Is(rd.StopErr, events.ErrThreadBusy) {
					t.Fatalf("released=%v: stopped with %v, want ErrThreadBusy", released, rd.StopErr)
				}
				stopped = true
				break
			}
		}
		if !stopped {
			t.Fatalf("released=%v: A's core did not stop at B's claim at %d", released, cb.Seq)
		}
	}
}
