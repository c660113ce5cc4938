package runner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/agent/agenttest"
	agentexec "github.com/artifactr/artifactr/actors/agent/exec"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
)

// bigAgent is an exec agent whose done line, for a prompt starting with
// "big", carries 600,000 bytes: under the protocol's 1 MiB line limit, over
// the store's limit in TestRunner_oversizedEvents.
const bigAgent = `read -r line
case "$line" in
*'"text":"big'*) out=$(head -c 600000 /dev/zero | tr '\0' a) ;;
*) out=small ;;
esac
printf '{"type":"done","output":"%s"}\n' "$out"
`

// Issue 12: an event over the store's limit used to hang its thread for
// good. On the real runner and JetStream, a message just under 1 MiB echoed
// back, and an exec agent's done line over the store's limit, are
// delivered as several run_output events; the next message still runs.
func TestRunner_oversizedEvents(t *testing.T) {
	tests := []struct {
		name   string
		limit  int // the store's MaxEventBytes; 0: the default 1 MiB
		agent  agent.Agent
		prompt string
		want   string // the delivered output, outputs joined
	}{
		{"echo of a message just under 1 MiB", 0, agent.Echo{},
			strings.Repeat("é", (events.DefaultMaxEventBytes-100)/2), ""}, // the post fits; "echo: " and the run's envelope do not
		{"exec done line over the store's limit", 256 << 10,
			agentexec.Agent{Path: "/bin/sh", Args: []string{"-c", bigAgent}, Timeout: 30 * time.Second},
			"big please", strings.Repeat("a", 600000)},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			srv := natsembedtest.RunForTest(t)
			s, err := natsstore.New(t.Context(), natsstore.Config{URL: srv.ClientURL(), MaxEventBytes: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			r := startRunner(t, runner.Config{Store: s, Agent: tc.agent, ClaimTTL: 3 * time.Second})
			defer func() {
				// Bounded: before the fix the thread spun for ever and Stop
				// with it.
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := r.Stop(ctx); err != nil {
					t.Errorf("stop: %v", err)
				}
			}()
			th := "big"
			post(t, s, th, tc.prompt)
			post(t, s, th, "next")
			testkit.WaitFor(t, 60*time.Second, "both messages run", settled(t, s, th))
			v := fold(t, s, th)
			if len(v.Runs) != 2 {
				t.Fatalf("%d runs, want 2", len(v.Runs))
			}
			first := v.Runs[0]
			if first.Status != projections.RunCompleted {
				t.Fatalf("the big run %s: %s", first.Status, first.Reason)
			}
			want := tc.want
			if want == "" {
				want = "echo: " + tc.prompt
			}
			got := first.Output
			if got == "" {
				got = strings.Join(first.Outputs, "")
			}
			if !strings.HasSuffix(got, want) {
				t.Fatalf("the big run delivered %d bytes, want the %d-byte output", len(got), len(want))
			}
			if len(first.Outputs) < 2 {
				t.Fatalf("%d run_output events, want the output split", len(first.Outputs))
			}
			if second := v.Runs[1]; second.Status != projections.RunCompleted {
				t.Fatalf("the next run %s: %s", second.Status, second.Reason)
			}
			if len(v.Anomalies) != 0 {
				t.Fatalf("anomalies: %+v", v.Anomalies)
			}
			auditClean(t, s, th)
		})
	}
}

// recordAgent asks, and records the error its Ask and a later Emit return
// once the runner cancels the run.
type recordAgent struct{ errs chan error }

func (recordAgent) Name() string    { return "record" }
func (recordAgent) Steerable() bool { return false }
func (a recordAgent) Run(ctx context.Context, t agent.Turn) (string, error) {
	_, err := t.Ask(ctx, "anyone?")
	a.errs <- err
	a.errs <- t.Emit(ctx, "late")
	return "", err
}

// The runner's Turn and agenttest's fake fail alike once a run is
// cancelled: with an error that is both agent.ErrRunEnded and
// context.Canceled (agenttest.CheckRunEnded).
func TestRunner_turnEndedLikeAgenttest(t *testing.T) {
	s := memstore.New(memstore.Config{})
	ag := recordAgent{errs: make(chan error, 2)}
	r := startRunner(t, runner.Config{Store: s, Agent: ag, ClaimTTL: 2 * time.Second, ShutdownGrace: time.Millisecond})
	post(t, s, "ended", "go")
	testkit.WaitFor(t, 10*time.Second, "the request opened", func() (bool, string) {
		v := fold(t, s, "ended")
		return len(v.OpenRequests()) == 1, fmt.Sprintf("%d open requests", len(v.OpenRequests()))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"Ask", "Emit"} {
		if err := agenttest.CheckRunEnded(<-ag.errs); err != nil {
			t.Errorf("%s after the run was cancelled: %v", what, err)
		}
	}
}
