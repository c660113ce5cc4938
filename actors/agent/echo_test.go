package agent_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/agent/agenttest"
)

func TestEcho_Run_plain(t *testing.T) {
	turn := agenttest.NewTurn("hello")
	e := agent.Echo{}
	out, err := e.Run(t.Context(), turn)
	if err != nil {
		t.Fatal(err)
	}
	if out != "echo: hello" {
		t.Errorf("output %q, want %q", out, "echo: hello")
	}
	if got := turn.Outputs(); !slices.Equal(got, []string{"echo: hello"}) {
		t.Errorf("emitted %q", got)
	}
	if e.Name() != "echo" || e.Steerable() {
		t.Errorf("Name %q Steerable %v", e.Name(), e.Steerable())
	}
}

func TestEcho_Run_ask(t *testing.T) {
	turn := agenttest.NewTurn("ask:  what is your name? ")
	turn.Answer("bob")
	out, err := agent.Echo{}.Run(t.Context(), turn)
	if err != nil {
		t.Fatal(err)
	}
	want := "echo: what is your name? -> bob"
	if out != want {
		t.Errorf("output %q, want %q", out, want)
	}
	if got := turn.Questions(); !slices.Equal(got, []string{"what is your name?"}) {
		t.Errorf("questions %q", got)
	}
	if got := turn.Outputs(); !slices.Equal(got, []string{want}) {
		t.Errorf("emitted %q", got)
	}
}

func TestEcho_Run_askRunEnded(t *testing.T) {
	turn := agenttest.NewTurn("ask: anyone?")
	turn.End()
	_, err := agent.Echo{}.Run(t.Context(), turn)
	if !errors.Is(err, agent.ErrRunEnded) {
		t.Fatalf("err %v, want ErrRunEnded", err)
	}
}

func TestEcho_Run_fail(t *testing.T) {
	for _, tc := range []struct{ prompt, reason string }{
		{"fail: disk full", "disk full"},
		{"fail:", "failed on request"},
	} {
		turn := agenttest.NewTurn(tc.prompt)
		out, err := agent.Echo{}.Run(t.Context(), turn)
		if err == nil || err.Error() != tc.reason {
			t.Errorf("%q: err %v, want %q", tc.prompt, err, tc.reason)
		}
		if out != "" || len(turn.Outputs()) != 0 {
			t.Errorf("%q: output %q, emitted %q", tc.prompt, out, turn.Outputs())
		}
	}
}

func TestEcho_Run_steer(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	turn.AddSteering("left")
	turn.AddSteering("right")
	e := agent.Echo{Steer: true, Delay: time.Millisecond}
	if !e.Steerable() {
		t.Fatal("Steer: true is not Steerable")
	}
	out, err := e.Run(t.Context(), turn)
	if err != nil {
		t.Fatal(err)
	}
	want := "echo: hi (steered: left) (steered: right)"
	if out != want {
		t.Errorf("output %q, want %q", out, want)
	}
}

// Steering posted while the run waits is taken at the wait's end, not only
// steering queued before it. Delay only has to outlast the AddSteering
// call right after the emit; 3s leaves a wide margin on a loaded machine.
func TestEcho_Run_steerWhileActive(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	e := agent.Echo{Steer: true, Delay: 3 * time.Second}
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := e.Run(t.Context(), turn)
		done <- result{out, err}
	}()
	if _, err := turn.WaitOutputs(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	turn.AddSteering("faster")
	r := <-done
	if r.err != nil || r.out != "echo: hi (steered: faster)" {
		t.Fatalf("output %q err %v", r.out, r.err)
	}
}

func TestEcho_Run_notSteerableIgnoresSteering(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	turn.AddSteering("ignored")
	out, err := agent.Echo{}.Run(t.Context(), turn)
	if err != nil || out != "echo: hi" {
		t.Fatalf("output %q err %v", out, err)
	}
	if n := turn.SteerCalls(); n != 0 {
		t.Errorf("an agent that is not steerable called Steer %d times", n)
	}
}

func TestEcho_Run_ctxCancel(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := agent.Echo{Delay: time.Hour}.Run(ctx, turn)
		done <- err
	}()
	if _, err := turn.WaitOutputs(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

func TestEcho_Run_cancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := (agent.Echo{}).Run(ctx, agenttest.NewTurn("hi")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

// A failing turn takes no steering, so what was posted meanwhile prompts
// the next run rather than being consumed by a run that fails.
func TestEcho_Run_failTakesNoSteering(t *testing.T) {
	turn := agenttest.NewTurn("fail: no")
	turn.AddSteering("later")
	_, err := agent.Echo{Steer: true}.Run(t.Context(), turn)
	if err == nil || err.Error() != "no" {
		t.Fatalf("err %v, want the failure", err)
	}
	if n := turn.SteerCalls(); n != 0 {
		t.Errorf("a failing turn called Steer %d times", n)
	}
}
