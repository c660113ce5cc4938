package strategies_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/doubletext"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
)

// historyAgent records the history and prompt each run is given, and keeps
// each run active until it is cancelled (or Delay passes).
type historyAgent struct {
	agent.Echo
	mu    sync.Mutex // protects turns
	turns map[string][]string
}

func newHistoryAgent() *historyAgent {
	return &historyAgent{Echo: agent.Echo{Delay: time.Hour}, turns: make(map[string][]string)}
}

func (h *historyAgent) Run(ctx context.Context, t agent.Turn) (string, error) {
	var texts []string
	for _, m := range t.History() {
		texts = append(texts, m.Text)
	}
	h.mu.Lock()
	h.turns[t.Prompt().Text] = texts
	h.mu.Unlock()
	return h.Echo.Run(ctx, t)
}

func (h *historyAgent) history(prompt string) ([]string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.turns[prompt]
	return v, ok
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// interruptCase posts "a" (completes), "b" (held active), then "c" with
// strategy st, and returns the agent, the store and the runs of b and c.
func interruptCase(t *testing.T, k storeKind, ag agent.Agent, st events.Strategy) (events.Store, string, *projections.Run, *projections.Run) {
	t.Helper()
	s := newStore(t, k)
	startRunner(t, s, ag)
	th := "int-" + string(st) + "-" + string(k)
	mustPost(t, s, th, "a", "")
	rA := activeRun(t, s, th)
	// a's run is cancelled; a stays in the history of later runs.
	if _, err := doubletext.Cancel(t.Context(), s, th, rA.ID, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	ended(t, s, th, rA.ID)
	mustPost(t, s, th, "b", "")
	rB := activeRun(t, s, th, rA.ID)
	mustPost(t, s, th, "c", st)
	got := ended(t, s, th, rB.ID)
	if got.Status != projections.RunFailed || got.Reason != events.ReasonInterrupted {
		t.Fatalf("run %s ended %s %q, want failed %q", rB.ID, got.Status, got.Reason, events.ReasonInterrupted)
	}
	rC := activeRun(t, s, th, rA.ID, rB.ID)
	return s, th, got, rC
}

// interrupt: the post cancels the active run, which fails "interrupted",
// and the next run starts on the post with the history so far.
// rollback: the same, and the interrupted run (its prompt b) is left out of
// the history.
func TestInterrupt_andRollback_echo(t *testing.T) {
	for _, k := range kinds {
		for _, st := range []events.Strategy{events.StrategyInterrupt, events.StrategyRollback} {
			t.Run(string(k)+"/"+string(st), func(t *testing.T) {
				ag := newHistoryAgent()
				s, th, rB, rC := interruptCase(t, k, ag, st)
				v := fold(t, s, th)
				if v.Messages[len(v.Messages)-1].Seq != rC.PromptSeq {
					t.Errorf("run %s took message %d, not the interrupting post", rC.ID, rC.PromptSeq)
				}
				var b *projections.Run
				for _, r := range v.Runs {
					if r.ID == rB.ID {
						b = r
					}
				}
				if b.InterruptSeq == 0 || b.RolledBack != (st == events.StrategyRollback) {
					t.Errorf("run %s: interrupt at %d, rolled back %v", b.ID, b.InterruptSeq, b.RolledBack)
				}
				want := []string{"a", "b"}
				if st == events.StrategyRollback {
					want = []string{"a"}
				}
				var hist []string
				testkit.CheckFor(t, wait, func() error {
					var ok bool
					if hist, ok = ag.history("c"); !ok {
						return errors.New("run of c not started in the agent yet")
					}
					return nil
				})
				if !equal(hist, want) {
					t.Errorf("history of c = %q, want %q", hist, want)
				}
				checkLog(t, s, th)
			})
		}
	}
}

// An interrupting post interrupts an exec agent that ignores cancellation:
// its program is killed after the grace period, the run fails
// "interrupted", and the post's run starts.
func TestInterrupt_execIgnoresCancellation(t *testing.T) {
	s := newStore(t, nats)
	startRunner(t, s, ignoringExec())
	th := "int-exec"
	mustPost(t, s, th, "a", "")
	r := activeRun(t, s, th)
	pid := waitPID(t, s, th, r.ID)
	b := mustPost(t, s, th, "b", events.StrategyInterrupt)
	got := ended(t, s, th, r.ID)
	if got.Status != projections.RunFailed || got.Reason != events.ReasonInterrupted {
		t.Fatalf("run %s ended %s %q, want failed %q", r.ID, got.Status, got.Reason, events.ReasonInterrupted)
	}
	wantGone(t, pid)
	if next := activeRun(t, s, th, r.ID); next.PromptSeq != b {
		t.Errorf("next run %s took message %d, want the interrupting post %d", next.ID, next.PromptSeq, b)
	}
	checkLog(t, s, th)
}

// reject: a post while a run is active is refused, "thread busy", and
// nothing is written; once the run ended, the post lands.
func TestReject(t *testing.T) {
	for _, k := range kinds {
		t.Run(string(k), func(t *testing.T) {
			s := newStore(t, k)
			startRunner(t, s, longEcho)
			th := "reject-" + string(k)
			if _, err := doubletext.Configure(t.Context(), s, th, events.StrategyReject, time.Now()); err != nil {
				t.Fatal(err)
			}
			mustPost(t, s, th, "a", "")
			r := activeRun(t, s, th)
			before := len(fold(t, s, th).Messages)
			_, err := post(t.Context(), s, th, "b", "")
			if !errors.Is(err, events.ErrThreadBusy) {
				t.Fatalf("post while busy: err %v, want ErrThreadBusy", err)
			}
			t.Logf("refused: %v", err)
			// An explicit per-post strategy overrides the thread's.
			if _, err := post(t.Context(), s, th, "queued", events.StrategyEnqueue); err != nil {
				t.Fatal(err)
			}
			if n := len(fold(t, s, th).Messages); n != before+1 {
				t.Fatalf("%d messages, want %d: the refused post was written", n, before+1)
			}
			if _, err := doubletext.Cancel(t.Context(), s, th, r.ID, "", time.Now()); err != nil {
				t.Fatal(err)
			}
			ended(t, s, th, r.ID)
			// "queued" runs next, and is cancelled too; then the thread is idle.
			r2 := activeRun(t, s, th, r.ID)
			if _, err := doubletext.Cancel(t.Context(), s, th, r2.ID, "", time.Now()); err != nil {
				t.Fatal(err)
			}
			settled(t, s, th)
			if _, err := post(t.Context(), s, th, "c", ""); err != nil {
				t.Fatalf("post while idle: %v", err)
			}
			checkLog(t, s, th)
		})
	}
}

// A reject post that repeats a message id already stored returns it as a
// duplicate, even while the thread is busy.
func TestReject_repostWhileBusy(t *testing.T) {
	s := newStore(t, mem)
	startRunner(t, s, longEcho)
	th := "reject-repost"
	m := &eventspb.MessagePosted{MessageId: "m1", Text: "a", Strategy: string(events.StrategyReject)}
	p := doubletext.Poster{Store: s}
	first, err := p.Post(t.Context(), th, m)
	if err != nil {
		t.Fatal(err)
	}
	activeRun(t, s, th)
	again, err := p.Post(t.Context(), th, m)
	if err != nil || !again.Duplicate || again.Seq != first.Seq {
		t.Fatalf("repost: %+v, %v; want a duplicate of %d", again, err, first.Seq)
	}
}
