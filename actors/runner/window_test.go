package runner_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections/audit"
)

// askAgent asks one question on the prompt "one" and returns the answer's
// text; it echoes any other prompt.
type askAgent struct{}

func (askAgent) Name() string    { return "ask" }
func (askAgent) Steerable() bool { return false }
func (askAgent) Run(ctx context.Context, t agent.Turn) (string, error) {
	if t.Prompt().Text != "one" {
		return t.Prompt().Text, nil
	}
	m, err := t.Ask(ctx, "which?")
	if err != nil {
		return "", err
	}
	return "got " + m.Text, nil
}

// windowStores are an honest runner's store and a forger's on one log, and
// whether the honest store guards consuming writes.
type windowStores struct {
	name    string
	open    func(t *testing.T) (honest, forger events.Store)
	guarded bool
}

func windowCases() []windowStores {
	nats := func(g natsstore.GuardMode, fence natsstore.FenceLayout) func(t *testing.T) (events.Store, events.Store) {
		return func(t *testing.T) (events.Store, events.Store) {
			srv := natsembedtest.RunForTest(t)
			var ss [2]events.Store
			for i := range ss {
				s, err := natsstore.New(t.Context(), natsstore.Config{URL: srv.ClientURL(), Guard: g, Fence: fence})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				ss[i] = s
			}
			return ss[0], ss[1]
		}
	}
	return []windowStores{
		{"memstore", func(t *testing.T) (events.Store, events.Store) {
			log := memstore.NewLog()
			return log.Open(memstore.Config{}), log.Open(memstore.Config{})
		}, true},
		{"memstore_runfence", func(t *testing.T) (events.Store, events.Store) {
			log := memstore.NewLog()
			cfg := memstore.Config{Subjects: events.Subjects{RunFence: true}}
			return log.Open(cfg), log.Open(cfg)
		}, true},
		{"natsstore_guard_on", nats(natsstore.GuardOn, ""), true},
		// RUNFENCE closes the window with no guard: every holder write is a
		// compare-and-set on the run subject.
		{"natsstore_runfence", nats(natsstore.GuardOff, natsstore.FenceRun), true},
		// The control: without the guard the window is open, and the honest
		// runner writes the violation (issue 23).
		{"natsstore_guard_off", nats(natsstore.GuardOff, ""), false},
	}
}

// forgerCheck is the check of a forged consuming write under c: the
// fence, or under RUNFENCE a compare-and-set on the run subject's last
// sequence, which a forger with runner credentials can read.
func forgerCheck(t *testing.T, s events.Store, c events.Claim) events.Check {
	if !s.Subjects().RunFence {
		return events.Fenced(c)
	}
	last, err := s.LastSeq(t.Context(), c.Thread, events.KindRun)
	if err != nil {
		t.Errorf("forger: read the run subject: %v", err)
	}
	return events.FencedGuarded(c, last)
}

// Issue 23, item 2, deterministically: a writer with runner credentials
// stores a fenced consuming event under the holder's claim in the holder's
// window, after its read and right before its own consuming append (the
// runner's BeforeAppend hook). With the guard, the honest append is refused
// (events.ErrRunMoved), the runner reads the log again, folds the forgery
// (abandoning a forged run, delivering a forged answer as the log says) and
// writes no I1 or I3 violation; without it, its append lands on top of the
// forgery and the audit names the honest event. Spec: I1_ConsumedAtMostOnce,
// I3_OneActiveRun.
func TestRunner_forgedConsumptionInWindow(t *testing.T) {
	type forgery struct {
		name string
		ag   agent.Agent
		// before: the honest append the forgery goes right before.
		before events.Type
		// forge builds the forged event from the honest one.
		forge func(honest *eventspb.Event, c events.Claim) *eventspb.Event
	}
	forgeries := []forgery{
		{"run_started", agent.Echo{}, events.TypeRunStarted, func(h *eventspb.Event, c events.Claim) *eventspb.Event {
			return events.NewRunStarted(c, time.Now(), "evil", h.GetRunStarted().GetPromptSeq(), "evil")
		}},
		{"answer_given", askAgent{}, events.TypeAnswerGiven, func(h *eventspb.Event, c events.Claim) *eventspb.Event {
			a := h.GetAnswerGiven()
			return events.NewAnswerGiven(c, time.Now(), a.GetRunId(), a.GetRequestId(), a.GetMessageSeq())
		}},
	}
	for _, sc := range windowCases() {
		for _, fg := range forgeries {
			t.Run(sc.name+"/"+fg.name, func(t *testing.T) {
				honest, fs := sc.open(t)
				const th = "window"
				var (
					once   sync.Once
					forged = make(chan uint64, 1)
				)
				hook := func(ctx context.Context, ev *eventspb.Event) {
					if events.TypeOf(ev) != fg.before || ev.GetThread() != th {
						return
					}
					once.Do(func() {
						c := events.Claim{Thread: th, Seq: ev.GetClaimSeq(), Holder: ev.GetHolder()}
						ack, err := fs.Append(ctx, fg.forge(ev, c), forgerCheck(t, fs, c), events.WithMsgID("forger:"+th+":1"))
						if err != nil {
							t.Errorf("forge %s: %v", fg.before, err)
						}
						forged <- ack.Seq
					})
				}
				r := startRunner(t, runner.Config{Store: honest, Agent: fg.ag, ClaimTTL: 3 * time.Second, BeforeAppend: hook})
				t.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					if err := r.Stop(ctx); err != nil {
						t.Errorf("stop: %v", err)
					}
				})
				post(t, honest, th, "one")
				if fg.before == events.TypeAnswerGiven {
					testkit.CheckFor(t, 20*time.Second, func() error {
						if len(fold(t, honest, th).OpenRequests()) == 0 {
							return errors.New("no open request yet")
						}
						return nil
					})
					post(t, honest, th, "two")
				}
				var at uint64
				select {
				case at = <-forged:
				case <-time.After(30 * time.Second):
					t.Fatal("the honest runner made no consuming append to forge before")
				}
				// The runner goes on serving the thread.
				post(t, honest, th, "three")
				testkit.CheckFor(t, 30*time.Second, func() error {
					if ok, why := settled(t, honest, th)(); !ok {
						return errors.New(why)
					}
					return nil
				})
				envs := load(t, honest, th)
				a := audit.New()
				for _, e := range envs {
					a.Add(e)
				}
				var honestViolations []string
				for _, v := range a.Report().Violations {
					last := v.Seqs[len(v.Seqs)-1]
					isHonest := false
					for _, e := range envs {
						if e.Seq == last {
							isHonest = e.Type != events.TypeMessagePosted && !strings.HasPrefix(e.MsgID, "forger:")
						}
					}
					if isHonest && (v.Check == audit.CheckI1 || v.Check == audit.CheckI3) {
						honestViolations = append(honestViolations, fmt.Sprintf("%s at %v: %s", v.Check, v.Seqs, v.Message))
					}
				}
				dump := func() {
					for _, e := range envs {
						t.Logf("  %d %s claim=%d msgid=%s %v", e.Seq, e.Type, e.Event.GetClaimSeq(), e.MsgID, e.Event.GetBody())
					}
				}
				switch {
				case sc.guarded && len(honestViolations) > 0:
					t.Errorf("guarded: the honest runner wrote %d I1/I3 violations: %s", len(honestViolations), strings.Join(honestViolations, "; "))
					dump()
				case !sc.guarded && len(honestViolations) == 0:
					t.Errorf("unguarded: no honest I1/I3 violation after a forgery at %d in the window; the test no longer shows the window", at)
					dump()
				}
				if sc.guarded && fg.before == events.TypeRunStarted {
					// The log is the truth: the holder folded the forged run
					// and ended it with its own fenced run_abandoned.
					abandoned := false
					for _, e := range envs {
						ra := e.Event.GetRunAbandoned()
						abandoned = abandoned || ra != nil && ra.GetRunId() == "evil" && !strings.HasPrefix(e.MsgID, "forger:")
					}
					if !abandoned {
						t.Errorf("the holder did not abandon the forged run at %d", at)
						dump()
					}
				}

			})
		}
	}
}
