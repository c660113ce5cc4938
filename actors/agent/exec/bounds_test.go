//go:build unix

package exec_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/agent/agenttest"
)

// Output lines that come faster than the flush interval are coalesced
// into few outputs, each at most 16 KiB unless one line is longer; joined
// they are the text.
func TestExec_Run_coalescesOutputs(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	// 2,000 lines of 100 bytes (200 KB) in one go.
	e := sh(`read -r turn; i=0; line=$(printf '%0100d' 0)
		while [ $i -lt 2000 ]; do echo "{\"type\":\"output\",\"text\":\"$line\"}"; i=$((i+1)); done
		echo '{"type":"done"}'`)
	r := run(t.Context(), e, turn)
	if r.err != nil {
		t.Fatalf("run: %v", r.err)
	}
	outs := turn.Outputs()
	joined := strings.Join(outs, "")
	if want := strings.Repeat(strings.Repeat("0", 100), 2000); joined != want {
		t.Fatalf("joined outputs are %d bytes, want %d", len(joined), len(want))
	}
	// 200 KB at 16 KiB an event is 13 events; a flush interval that ends
	// while the program writes adds some.
	if len(outs) > 200 {
		t.Errorf("%d outputs for 2000 lines; want them coalesced", len(outs))
	}
	for i, o := range outs {
		if len(o) > 16<<10+100 {
			t.Errorf("output %d is %d bytes, over 16 KiB", i, len(o))
		}
	}
	t.Logf("2000 lines -> %d outputs", len(outs))
}

// A line buffered while the program waits is emitted once the flush
// interval passes, with no further line to push it.
func TestExec_Run_flushesIdleOutput(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	// The program waits on a FIFO of the test's, not on stdin: nothing
	// artifactr writes may wake it.
	fifo := filepath.Join(t.TempDir(), "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	e := sh(`read -r turn; echo '{"type":"output","text":"thinking"}'; read -r go < ` + fifo + `; echo '{"type":"done"}'`)
	res := make(chan result, 1)
	go func() { res <- run(t.Context(), e, turn) }()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got, err := turn.WaitOutputs(ctx, 1)
	if err != nil {
		t.Fatalf("no output while the program waits: %v", err)
	}
	if got[0] != "thinking" {
		t.Errorf("output %q", got[0])
	}
	if err := os.WriteFile(fifo, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil {
		t.Fatalf("run: %v", r.err)
	}
}

// A program past its output budget in bytes fails its run and is killed;
// what was written stays within the budget.
func TestExec_Run_outputBudgetBytes(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	e := sh(`read -r turn; echo "{\"type\":\"output\",\"text\":\"$$ \"}"; line=$(printf '%01000d' 0)
		while :; do echo "{\"type\":\"output\",\"text\":\"$line\"}"; done`)
	e.MaxOutputBytes = 64 << 10
	r := run(t.Context(), e, turn)
	want := "exec: output over the run's budget of 65536 bytes (serve --exec-max-output-bytes); the program was killed"
	if r.err == nil || r.err.Error() != want {
		t.Fatalf("err %v, want %q", r.err, want)
	}
	outs := turn.Outputs()
	if n := len(strings.Join(outs, "")); n > 64<<10 {
		t.Errorf("%d bytes written, over the budget", n)
	}
	pid, _, _ := strings.Cut(outs[0], " ")
	wantGone(t, &agenttest.Turn{}, -1, pid)
}

// The budget in events counts run_output and request_opened events.
func TestExec_Run_outputBudgetEvents(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	turn.AnswerFunc = func(context.Context, string) (agent.Message, error) {
		return agent.Message{Seq: 9, Text: "yes"}, nil
	}
	e := sh(`read -r turn; while :; do echo '{"type":"output","text":"x"}'; echo '{"type":"ask","question":"more?"}'; read -r answer; done`)
	e.MaxOutputEvents = 5
	r := run(t.Context(), e, turn)
	want := "exec: output over the run's budget of 5 events (serve --exec-max-output-events); the program was killed"
	if r.err == nil || r.err.Error() != want {
		t.Fatalf("err %v, want %q", r.err, want)
	}
	if n, q := len(turn.Outputs()), len(turn.Questions()); n != 3 || q != 2 {
		t.Errorf("%d outputs and %d questions, want 3 and 2 (5 events)", n, q)
	}
}

// stuckTurn is a turn whose Emit waits until its context ends, as a run's
// does when the store stops taking appends.
type stuckTurn struct{ *agenttest.Turn }

func (s stuckTurn) Emit(ctx context.Context, text string) error {
	<-ctx.Done()
	return errors.Join(agent.ErrRunEnded, ctx.Err())
}

// The turn's time limit covers the time its outputs take to be written.
func TestExec_Run_timeoutCoversEmit(t *testing.T) {
	turn := stuckTurn{agenttest.NewTurn("hi")}
	e := sh(`read -r turn; echo '{"type":"output","text":"x"}'; echo '{"type":"done"}'`)
	e.Timeout = 300 * time.Millisecond
	res := make(chan result, 1)
	go func() { res <- run(t.Context(), e, turn) }()
	select {
	case r := <-res:
		if r.err == nil || r.err.Error() != "exec: timed out after 300ms" {
			t.Fatalf("err %v, want the timeout", r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run still waits on Emit 30s after its 300ms timeout")
	}
}
