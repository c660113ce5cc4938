package openai_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/agent/agenttest"
	"github.com/artifactr/artifactr/actors/agent/openai"
)

// roles renders a request's messages as "role:content".
func roles(r recorded) []string {
	var got []string
	for _, m := range r.Body.Messages {
		c := ""
		if m.Content != nil {
			c = *m.Content
		}
		got = append(got, m.Role+":"+c)
	}
	return got
}

// A message posted while the model streams is added after its reply, and
// the model is asked again: the run's output is both replies.
func TestAgent_Run_steeredMidStream(t *testing.T) {
	release := make(chan struct{})
	f := newFakeServer(t,
		func(w http.ResponseWriter, r *http.Request, n int) {
			s := startStream(w)
			s.content("Here is a long answer")
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			s.finish("stop")
		},
		streamText(" -- short: yes."),
	)
	a := newAgent(t, f, openai.Config{Steer: true, FlushInterval: 1})
	if !a.Steerable() {
		t.Fatal("Steer: true, yet not Steerable")
	}
	turn := agenttest.NewTurn("explain")
	done := make(chan error, 1)
	go func() {
		_, err := a.Run(runCtx(t), turn)
		done <- err
	}()
	if _, err := turn.WaitOutputs(runCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	turn.AddSteering("make it short")
	close(release)
	if err := waitRun(t, done); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	want := []string{"user:explain", "assistant:Here is a long answer", "user:make it short"}
	if got := roles(reqs[1]); !slices.Equal(got, want) {
		t.Errorf("second request = %q, want %q", got, want)
	}
	if got := strings.Join(turn.Outputs(), ""); got != "Here is a long answer -- short: yes." {
		t.Errorf("outputs = %q", got)
	}
}

// Steering queued before the first request is in it; steering posted while
// an ask waits follows the tool's result.
func TestAgent_Run_steeredBeforeAndDuringAsk(t *testing.T) {
	f := newFakeServer(t,
		func(w http.ResponseWriter, r *http.Request, n int) {
			s := startStream(w)
			s.toolDelta(0, "c1", "ask_user", `{"question":"which?"}`)
			s.finish("tool_calls")
		},
		streamText("ok"),
	)
	a := newAgent(t, f, openai.Config{Steer: true})
	turn := agenttest.NewTurn("pick")
	turn.AddSteering("early")
	turn.AnswerFunc = func(ctx context.Context, q string) (agent.Message, error) {
		turn.AddSteering("late")
		return agent.Message{Text: "the red one"}, nil
	}
	if _, err := a.Run(runCtx(t), turn); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if got, want := roles(reqs[0]), []string{"user:pick", "user:early"}; !slices.Equal(got, want) {
		t.Errorf("first request = %q, want %q", got, want)
	}
	if got, want := roles(reqs[1]), []string{"user:pick", "user:early", "assistant:", "tool:the red one", "user:late"}; !slices.Equal(got, want) {
		t.Errorf("second request = %q, want %q", got, want)
	}
}

// Without Steer the agent takes no steering: one request, and the message
// stays queued for the runner to hold for the next run.
func TestAgent_Run_notSteerable(t *testing.T) {
	f := newFakeServer(t, streamText("ok"))
	a := newAgent(t, f, openai.Config{})
	if a.Steerable() {
		t.Fatal("Steerable without Steer")
	}
	turn := agenttest.NewTurn("q")
	turn.AddSteering("ignored")
	if _, err := a.Run(runCtx(t), turn); err != nil {
		t.Fatal(err)
	}
	if n := len(f.requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
	if n := turn.SteerCalls(); n != 0 {
		t.Fatalf("an agent that is not steerable called Steer %d times", n)
	}
}
