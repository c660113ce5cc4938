package agenttest_test

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/agent/agenttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var _ agent.Turn = (*agenttest.Turn)(nil)

func TestTurn_Ask_blocksUntilAnswered(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	got := make(chan agent.Message, 1)
	go func() {
		m, err := turn.Ask(t.Context(), "q?")
		if err != nil {
			t.Error(err)
		}
		got <- m
	}()
	if _, err := turn.WaitQuestions(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	turn.Answer("a")
	if m := <-got; m.Text != "a" || m.Seq != 2 {
		t.Errorf("answer %+v", m)
	}
}

func TestTurn_End(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	done := make(chan error, 1)
	go func() {
		_, err := turn.Ask(t.Context(), "q?")
		done <- err
	}()
	if _, err := turn.WaitQuestions(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	turn.End()
	if err := agenttest.CheckRunEnded(<-done); err != nil {
		t.Errorf("blocked Ask: %v", err)
	}
	if err := agenttest.CheckRunEnded(turn.Emit(t.Context(), "x")); err != nil {
		t.Errorf("Emit after End: %v", err)
	}
}

func TestTurn_cancelledContext(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := turn.Emit(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("Emit: %v", err)
	}
	if _, err := turn.Ask(ctx, "q"); !errors.Is(err, context.Canceled) {
		t.Errorf("Ask: %v", err)
	}
	if len(turn.Outputs()) != 0 || len(turn.Questions()) != 0 {
		t.Errorf("recorded %q %q", turn.Outputs(), turn.Questions())
	}
}
