//go:build unix

package exec_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/agent/agenttest"
	agentexec "github.com/artifactr/artifactr/actors/agent/exec"
)

// sh is an Exec agent running script with /bin/sh.
func sh(script string) agentexec.Agent {
	return agentexec.Agent{Path: "/bin/sh", Args: []string{"-c", script}}
}

type result struct {
	out     string
	err     error
	elapsed time.Duration
}

func run(ctx context.Context, e agentexec.Agent, turn agent.Turn) result {
	start := time.Now()
	out, err := e.Run(ctx, turn)
	return result{out, err, time.Since(start)}
}

// wantGone fails if the program whose pid it emitted as output[i] is still
// around: Run must have killed and reaped it.
// With i < 0, the pid is given instead.
func wantGone(t *testing.T, turn *agenttest.Turn, i int, given ...string) {
	t.Helper()
	var text string
	if i < 0 {
		text = given[0]
	} else {
		outputs := turn.Outputs()
		if len(outputs) <= i {
			t.Fatalf("no pid in outputs %q", outputs)
		}
		text = outputs[i]
	}
	pid, err := strconv.Atoi(text)
	if err != nil {
		t.Fatalf("output %q is not a pid", text)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("program %d still exists after Run (kill 0: %v)", pid, err)
	}
}

// emitPID is a script line that emits the shell's pid as output.
const emitPID = `echo "{\"type\":\"output\",\"text\":\"$$\"}"; `

func TestExec_Run_turnLine(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	turn.Hist = []agent.Message{{Seq: 0, ID: "m0", Text: "before"}}
	want := `{"type":"turn","protocol":3,"token":{"thread":"t1","claim_seq":1,"run_id":"run-1"},` +
		`"prompt":{"seq":1,"id":"m1","author":"user","text":"hi","role":"user"},` +
		`"history":[{"seq":0,"id":"m0","text":"before","role":"user"}]}`
	e := sh(`read -r turn; if [ "$turn" = '` + want + `' ]; then
		echo '{"type":"done","output":"ok"}'
	else
		echo "got $turn" >&2; exit 1
	fi`)
	r := run(t.Context(), e, turn)
	if r.err != nil || r.out != "ok" {
		t.Fatalf("output %q err %v", r.out, r.err)
	}
}

func TestExec_Run_emptyHistoryIsArray(t *testing.T) {
	e := sh(`read -r turn; case "$turn" in *'"history":[]}') echo '{"type":"done","output":"ok"}';; *) exit 1;; esac`)
	r := run(t.Context(), e, agenttest.NewTurn("hi"))
	if r.err != nil || r.out != "ok" {
		t.Fatalf("output %q err %v", r.out, r.err)
	}
}

func TestExec_Run_done(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	e := sh(`read -r turn
		echo '{"type":"output","text":"one"}'
		echo
		echo '{"type":"output","text":"two","extra":true}'
		echo '{"type":"done","output":"final"}'`)
	r := run(t.Context(), e, turn)
	if r.err != nil || r.out != "final" {
		t.Fatalf("output %q err %v", r.out, r.err)
	}
	// Lines that come together are coalesced into one output.
	if got := turn.Outputs(); !slices.Equal(got, []string{"onetwo"}) {
		t.Errorf("emitted %q", got)
	}
	if e.Name() != "exec" || e.Steerable() {
		t.Errorf("Name %q Steerable %v", e.Name(), e.Steerable())
	}
}

// A program that lingers after done is killed once the grace ends.
func TestExec_Run_doneThenLinger(t *testing.T) {
	defer agentexec.SetDoneGrace(50 * time.Millisecond)()
	turn := agenttest.NewTurn("hi")
	e := sh(`read -r turn; trap '' TERM; ` + emitPID + `echo '{"type":"done","output":"ok"}'; sleep 30`)
	r := run(t.Context(), e, turn)
	if r.err != nil || r.out != "ok" {
		t.Fatalf("output %q err %v", r.out, r.err)
	}
	if r.elapsed > 10*time.Second {
		t.Errorf("took %v to stop a lingering program", r.elapsed)
	}
	wantGone(t, turn, 0)
}

func TestExec_Run_timeout(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	e := sh(`read -r turn; ` + emitPID + `sleep 30`)
	e.Timeout = 300 * time.Millisecond
	r := run(t.Context(), e, turn)
	if r.err == nil || r.err.Error() != "exec: timed out after 300ms" {
		t.Fatalf("err %v, want timeout", r.err)
	}
	if r.elapsed > 10*time.Second {
		t.Errorf("timeout of 300ms took %v", r.elapsed)
	}
	wantGone(t, turn, 0)
}

func TestExec_Run_crash(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	e := sh(`read -r turn; echo '{"type":"output","text":"partial"}'; echo 'model went away' >&2; exit 3`)
	r := run(t.Context(), e, turn)
	want := "exec: program exited with status 3 before done; stderr: model went away"
	if r.err == nil || r.err.Error() != want {
		t.Fatalf("err %v, want %q", r.err, want)
	}
	if got := turn.Outputs(); !slices.Equal(got, []string{"partial"}) {
		t.Errorf("emitted %q", got)
	}
}

func TestExec_Run_exitWithoutDone(t *testing.T) {
	for name, script := range map[string]string{
		"read":   `read -r turn; exit 0`,
		"noread": `exit 0`, // the turn line may meet a closed pipe
	} {
		r := run(t.Context(), sh(script), agenttest.NewTurn("hi"))
		want := "exec: program exited with status 0 before done"
		if r.err == nil || r.err.Error() != want {
			t.Errorf("%s: err %v, want %q", name, r.err, want)
		}
	}
}

// A background child holding stdout must not keep a crashed turn open.
func TestExec_Run_crashWithChildHoldingStdout(t *testing.T) {
	r := run(t.Context(), sh(`read -r turn; sleep 30 & exit 3`), agenttest.NewTurn("hi"))
	want := "exec: program exited with status 3 before done"
	if r.err == nil || r.err.Error() != want {
		t.Fatalf("err %v, want %q", r.err, want)
	}
	if r.elapsed > 10*time.Second {
		t.Errorf("took %v", r.elapsed)
	}
}

func TestExec_Run_malformed(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	e := sh(`read -r turn; echo oops >&2; ` + emitPID + `echo 'not json'; sleep 30`)
	r := run(t.Context(), e, turn)
	if r.err == nil || !strings.HasPrefix(r.err.Error(), `exec: malformed line 2: "not json": invalid character`) {
		t.Fatalf("err %v, want malformed line 2", r.err)
	}
	if !strings.HasSuffix(r.err.Error(), "; stderr: oops") {
		t.Errorf("err %v lacks stderr", r.err)
	}
	wantGone(t, turn, 0)
}

func TestExec_Run_malformedLongLineTruncated(t *testing.T) {
	long := strings.Repeat("x", 5000)
	r := run(t.Context(), sh(`read -r turn; echo `+long), agenttest.NewTurn("hi"))
	if r.err == nil || !strings.HasPrefix(r.err.Error(), `exec: malformed line 1: "xxx`) || len(r.err.Error()) > 400 {
		t.Fatalf("err %v, want a truncated quote", r.err)
	}
}

func TestExec_Run_lineTooLong(t *testing.T) {
	r := run(t.Context(), sh(`read -r turn; head -c 2000000 /dev/zero | tr '\0' a; echo`), agenttest.NewTurn("hi"))
	want := "exec: line 1 longer than 1048576 bytes"
	if r.err == nil || r.err.Error() != want {
		t.Fatalf("err %v, want %q", r.err, want)
	}
}

func TestExec_Run_unknownType(t *testing.T) {
	r := run(t.Context(), sh(`read -r turn; echo '{"type":"dance"}'`), agenttest.NewTurn("hi"))
	want := `exec: unknown type "dance" on line 1: "{\"type\":\"dance\"}"`
	if r.err == nil || r.err.Error() != want {
		t.Fatalf("err %v, want %q", r.err, want)
	}
}

func TestExec_Run_programError(t *testing.T) {
	r := run(t.Context(), sh(`read -r turn; echo '{"type":"error","reason":"no model"}'`), agenttest.NewTurn("hi"))
	if r.err == nil || r.err.Error() != "exec: program error: no model" {
		t.Fatalf("err %v", r.err)
	}
}

func TestExec_Run_askAnswer(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	turn.Answer("bob")
	turn.Answer("blue")
	e := sh(`read -r turn
		echo '{"type":"ask","question":"name?"}'
		read -r a1
		echo '{"type":"ask","question":"colour?","request_id":"q-7"}'
		read -r a2
		if [ "$a1" = '{"type":"answer","request_id":"1","message":{"seq":2,"id":"answer-2","author":"tester","text":"bob","role":"user"}}' ] &&
		   [ "$a2" = '{"type":"answer","request_id":"q-7","message":{"seq":3,"id":"answer-3","author":"tester","text":"blue","role":"user"}}' ]; then
			echo '{"type":"done","output":"ok"}'
		else
			echo "a1=$a1 a2=$a2" >&2; exit 1
		fi`)
	r := run(t.Context(), e, turn)
	if r.err != nil || r.out != "ok" {
		t.Fatalf("output %q err %v", r.out, r.err)
	}
	if got := turn.Questions(); !slices.Equal(got, []string{"name?", "colour?"}) {
		t.Errorf("questions %q", got)
	}
}

// Waiting for an answer does not count against Timeout: answers may come
// from people. The wait is real time because that is what is being tested.
func TestExec_Run_askPausesTimeout(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	turn.AnswerFunc = func(ctx context.Context, q string) (agent.Message, error) {
		select {
		case <-time.After(2 * time.Second):
			return agent.Message{Seq: 2, ID: "a", Text: "late"}, nil
		case <-ctx.Done():
			return agent.Message{}, ctx.Err()
		}
	}
	e := sh(`read -r turn; echo '{"type":"ask","question":"q"}'; read -r a; echo '{"type":"done","output":"ok"}'`)
	e.Timeout = time.Second
	r := run(t.Context(), e, turn)
	if r.err != nil || r.out != "ok" {
		t.Fatalf("output %q err %v", r.out, r.err)
	}
}

func TestExec_Run_askRunEnded(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	turn.End()
	r := run(t.Context(), sh(`read -r turn; echo '{"type":"ask","question":"q"}'; sleep 30`), turn)
	if !errors.Is(r.err, agent.ErrRunEnded) || !strings.HasPrefix(r.err.Error(), "exec: ask: ") {
		t.Fatalf("err %v, want exec: ask: ErrRunEnded", r.err)
	}
}

func TestExec_Run_steering(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	turn.AddSteering("go left")
	e := sh(`read -r turn; echo '{"type":"steer"}'; read -r s
		if [ "$s" = '{"type":"steering","messages":[{"seq":2,"id":"steer-2","author":"tester","text":"go left","role":"user"}]}' ]; then
			echo '{"type":"done","output":"steered"}'
		else
			echo "got $s" >&2; exit 1
		fi`)
	e.Steer = true
	if !e.Steerable() {
		t.Fatal("Steer: true is not Steerable")
	}
	r := run(t.Context(), e, turn)
	if r.err != nil || r.out != "steered" {
		t.Fatalf("output %q err %v", r.out, r.err)
	}
}

// Without Steer, a steer line is answered with no messages, and steering
// waits for the next run instead of being consumed.
func TestExec_Run_notSteerable(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	turn.AddSteering("later")
	r := run(t.Context(), sh(`read -r turn; echo '{"type":"steer"}'; read -r s
		if [ "$s" = '{"type":"steering","messages":[]}' ]; then
			echo '{"type":"done","output":"ok"}'
		else
			echo "got $s" >&2; exit 1
		fi`), turn)
	if r.err != nil || r.out != "ok" {
		t.Fatalf("output %q err %v", r.out, r.err)
	}
	if n := turn.SteerCalls(); n != 0 {
		t.Errorf("Steer called %d times for an agent that is not steerable", n)
	}
}

// Steering is pulled: a program that never sends a steer line is never
// given any, so nothing is consumed that it did not read.
func TestExec_Run_steeringOnlyWhenAsked(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	turn.AddSteering("unread")
	e := sh(`read -r turn; echo '{"type":"done","output":"ok"}'`)
	e.Steer = true
	r := run(t.Context(), e, turn)
	if r.err != nil || r.out != "ok" {
		t.Fatalf("output %q err %v", r.out, r.err)
	}
	if n := turn.SteerCalls(); n != 0 {
		t.Errorf("Steer called %d times for a program that never asked", n)
	}
}

func TestExec_Run_ctxCancel(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan result, 1)
	go func() { done <- run(ctx, sh(`read -r turn; `+emitPID+`sleep 30`), turn) }()
	if _, err := turn.WaitOutputs(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	r := <-done
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", r.err)
	}
	wantGone(t, turn, 0)
}

func TestExec_Run_badPath(t *testing.T) {
	r := run(t.Context(), agentexec.Agent{Path: "/nonexistent/agent"}, agenttest.NewTurn("hi"))
	if r.err == nil || !strings.HasPrefix(r.err.Error(), "exec: start /nonexistent/agent: ") {
		t.Fatalf("err %v", r.err)
	}
	r = run(t.Context(), agentexec.Agent{}, agenttest.NewTurn("hi"))
	if r.err == nil || r.err.Error() != "exec: no program path" {
		t.Fatalf("err %v", r.err)
	}
}

func TestExec_Run_envAndDir(t *testing.T) {
	dir := t.TempDir()
	e := sh(`read -r turn; echo "{\"type\":\"done\",\"output\":\"$GREETING $(pwd)\"}"`)
	e.Env = []string{"GREETING=hello"}
	e.Dir = dir
	r := run(t.Context(), e, agenttest.NewTurn("hi"))
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.err != nil || (r.out != "hello "+dir && r.out != "hello "+resolved) {
		t.Fatalf("output %q err %v", r.out, r.err)
	}
}

// python3 runs examples/echo-agent.py, the documented example agent.
func python3(t *testing.T) agentexec.Agent {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed to test examples/echo-agent.py: %v", err)
	}
	return agentexec.Agent{Path: py, Args: []string{filepath.Join("..", "..", "..", "examples", "echo-agent.py")}}
}

func TestExec_Run_pythonExample(t *testing.T) {
	turn := agenttest.NewTurn("hello")
	r := run(t.Context(), python3(t), turn)
	if r.err != nil || r.out != "py-echo: hello" {
		t.Fatalf("output %q err %v", r.out, r.err)
	}
	if got := turn.Outputs(); !slices.Equal(got, []string{"py-echo: hello"}) {
		t.Errorf("emitted %q", got)
	}
}

func TestExec_Run_pythonExampleAsk(t *testing.T) {
	turn := agenttest.NewTurn("ask: what is your name?")
	turn.Answer("bob")
	turn.AddSteering("be brief")
	e := python3(t)
	e.Steer = true
	r := run(t.Context(), e, turn)
	want := "py-echo: what is your name? -> bob"
	if r.err != nil || !strings.HasPrefix(r.out, want) {
		t.Fatalf("output %q err %v, want prefix %q", r.out, r.err, want)
	}
	if got := turn.Questions(); !slices.Equal(got, []string{"what is your name?"}) {
		t.Errorf("questions %q", got)
	}
}

// convTurn is a turn that gives its conversation, as the runner's does.
type convTurn struct {
	*agenttest.Turn
	conv []agent.Message
}

func (c convTurn) Conversation() []agent.Message { return c.conv }

// Protocol 2: history carries earlier runs' replies, with their roles.
func TestExec_Run_historyWithReplies(t *testing.T) {
	turn := convTurn{agenttest.NewTurn("and now?"), []agent.Message{
		{Seq: 1, ID: "m1", Author: "ann", Text: "hi"},
		{Seq: 3, Author: "assistant", Text: "hello ann", Run: "r2"},
	}}
	want := `"history":[{"seq":1,"id":"m1","author":"ann","text":"hi","role":"user"},` +
		`{"seq":3,"id":"","author":"assistant","text":"hello ann","role":"assistant","run":"r2"}]}`
	e := sh(`read -r turn; case "$turn" in *'` + want + `') echo '{"type":"done","output":"ok"}';; *) echo "got $turn" >&2; exit 1;; esac`)
	if r := run(t.Context(), e, turn); r.err != nil || r.out != "ok" {
		t.Fatalf("output %q err %v", r.out, r.err)
	}
}

// pagerTurn is a turn that pages back, as the runner's does: the thread's
// messages are msgs, oldest first.
type pagerTurn struct {
	*agenttest.Turn
	msgs []agent.Message
	asks [][2]uint64 // the (before, n) of each call
}

func (p *pagerTurn) MessagesBefore(_ context.Context, seq uint64, n int) ([]agent.Message, error) {
	p.asks = append(p.asks, [2]uint64{seq, uint64(n)})
	var out []agent.Message
	for _, m := range p.msgs {
		if m.Seq < seq {
			out = append(out, m)
		}
	}
	return out[max(0, len(out)-n):], nil
}

// A page line is answered with the newest messages before its seq (the
// prompt's when 0), at most its limit, oldest first.
func TestExec_Run_page(t *testing.T) {
	turn := &pagerTurn{Turn: agenttest.NewTurn("hi")}
	turn.Msg.Seq = 10
	for i := uint64(1); i < 10; i++ {
		turn.msgs = append(turn.msgs, agent.Message{Seq: i, ID: fmt.Sprintf("m%d", i), Text: fmt.Sprintf("t%d", i)})
	}
	e := sh(`read -r turn
		echo '{"type":"page","limit":2}'; read -r a
		echo '{"type":"page","before":3}'; read -r b
		echo "{\"type\":\"done\",\"output\":$(printf '%s' "[$a,$b]" | sed 's/"/\\"/g; s/^/"/; s/$/"/')}"`)
	r := run(t.Context(), e, turn)
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := `[{"type":"page","messages":[{"seq":8,"id":"m8","text":"t8","role":"user"},{"seq":9,"id":"m9","text":"t9","role":"user"}]},` +
		`{"type":"page","messages":[{"seq":1,"id":"m1","text":"t1","role":"user"},{"seq":2,"id":"m2","text":"t2","role":"user"}]}]`
	if r.out != want {
		t.Errorf("pages\n%s\nwant\n%s", r.out, want)
	}
	if want := [][2]uint64{{10, 2}, {3, 256}}; !slices.Equal(turn.asks, want) {
		t.Errorf("MessagesBefore calls %v, want %v", turn.asks, want)
	}
}

// A page's text is bounded: past 4 MiB the oldest messages are left out,
// and the program pages on from the oldest it got.
func TestExec_Run_pageBytesBounded(t *testing.T) {
	turn := &pagerTurn{Turn: agenttest.NewTurn("hi")}
	turn.Msg.Seq = 100
	big := strings.Repeat("x", 1<<20)
	for i := uint64(1); i <= 6; i++ {
		turn.msgs = append(turn.msgs, agent.Message{Seq: i, Text: big})
	}
	e := sh(`read -r turn; echo '{"type":"page"}'; read -r a
		n=$(printf '%s' "$a" | grep -o '"seq":[0-9]*' | tr -d '"' | tr '\n' ' ')
		echo "{\"type\":\"done\",\"output\":\"$n\"}"`)
	r := run(t.Context(), e, turn)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if want := `seq:3 seq:4 seq:5 seq:6 `; r.out != want {
		t.Errorf("page held %q, want the newest four messages (4 MiB)", r.out)
	}
}

// A page line with a negative limit fails the turn with a clear reason.
func TestExec_Run_pageBadLimit(t *testing.T) {
	turn := &pagerTurn{Turn: agenttest.NewTurn("hi")}
	r := run(t.Context(), sh(`read -r turn; echo '{"type":"page","limit":-1}'; read -r a`), turn)
	if r.err == nil || !strings.Contains(r.err.Error(), "page line with limit -1") {
		t.Fatalf("err %v, want the bad limit named", r.err)
	}
}

// A turn that cannot page answers a page line with no messages.
func TestExec_Run_pageUnsupported(t *testing.T) {
	turn := agenttest.NewTurn("hi")
	e := sh(`read -r turn; echo '{"type":"page"}'; read -r a; echo "{\"type\":\"done\",\"output\":\"$(printf '%s' "$a" | sed 's/"/\\\\"/g')\"}"`)
	r := run(t.Context(), e, turn)
	if r.err != nil || r.out != `{"type":"page","messages":[]}` {
		t.Fatalf("output %q err %v", r.out, r.err)
	}
}
