package exec

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
)

// DefaultTimeout bounds a turn of an [Agent] whose Timeout is zero.
const DefaultTimeout = 60 * time.Second

// Defaults of an [Agent]'s output budget: past either, its run fails and
// its program is killed.
const (
	DefaultMaxOutputBytes  = 8 << 20
	DefaultMaxOutputEvents = 4096
)

// Coalescing of output lines into run_output events: buffered text is
// emitted flushEvery after its first byte, or once flushBytes are buffered.
const (
	flushEvery = 50 * time.Millisecond
	flushBytes = 16 << 10
)

// DefaultCancelGrace is how long the program of an [Exec] agent whose
// CancelGrace is zero has to exit after its run is cancelled.
const DefaultCancelGrace = 2 * time.Second

// Limits of the exec protocol. They are set explicitly so a misbehaving
// program costs bounded memory.
const (
	maxLineBytes    = 1 << 20 // longest accepted stdout line
	stderrTailBytes = 4 << 10 // stderr kept for failure reasons
	quoteBytes      = 120     // bad line quoted in an error
	waitDelay       = time.Second
)

// Seams for tests: how long a program may take to exit after done, and how
// long stdout may stay open after the program exited (a grandchild may hold
// it).
var (
	doneGrace = 2 * time.Second
	exitDrain = time.Second
	nowFunc   = time.Now
)

// Agent runs one program per turn and talks to it in JSON lines, so agents can
// be written in any language. The protocol is in the package doc and in
// actors/agent/PROTOCOL.md.
//
// The program runs in its own process group; on every failure the whole
// group is killed and the program is reaped before Run returns.
type Agent struct {
	// Path is the program to run; it is looked up in PATH if it has no
	// slash.
	Path string
	// Args are the program's arguments, without the program name.
	Args []string
	// Timeout bounds the turn; zero means [DefaultTimeout]. Time spent
	// waiting in [agent.Turn.Ask] is not counted, because answers may come from
	// people.
	Timeout time.Duration
	// Steer makes the agent Steerable: a program's "steer" line is answered
	// with the messages posted since the turn started (a "steering" line).
	Steer bool
	// Env holds KEY=value pairs for the program. The program does not
	// inherit artifactr's environment: it gets PATH, HOME and LANG, the
	// variables PassEnv names, and Env; never ARTIFACTR_* or NATS_*.
	Env []string
	// PassEnv names variables of artifactr's environment the program may
	// see (serve --agent-env).
	PassEnv []string
	// Dir is the program's working directory; empty means artifactr's.
	Dir string
	// CancelGrace is how long the program has to exit once its run is
	// cancelled (a cancel request, an interrupting post, shutdown): it
	// gets SIGTERM (its process group) and EOF on stdin, and is killed
	// when the grace is over. Zero means [DefaultCancelGrace].
	CancelGrace time.Duration
	// MaxOutputBytes and MaxOutputEvents are the run's output budget: the
	// bytes of output text, questions and final output, and the
	// run_output and request_opened events written. A program that goes
	// past either fails its run and is killed. Zero means
	// [DefaultMaxOutputBytes] and [DefaultMaxOutputEvents].
	MaxOutputBytes  int
	MaxOutputEvents int
	// User, when set, runs the program as this user (a name or a numeric
	// uid), with the user's primary group. Only a process running as root
	// may do so.
	User string
}

// Name returns "exec".
func (Agent) Name() string { return "exec" }

// Steerable reports e.Steer.
func (e Agent) Steerable() bool { return e.Steer }

// Run starts the program, converses with it until it sends done or error,
// and stops it. Every error starts with "exec: " and, if the program wrote to
// stderr, ends with "; stderr: <last 4 KiB>".
func (e Agent) Run(ctx context.Context, t agent.Turn) (string, error) {
	if e.Path == "" {
		return "", errors.New("exec: no program path")
	}
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	p, err := e.start(ctx)
	if err != nil {
		return "", err
	}
	p.maxBytes = cmp.Or(e.MaxOutputBytes, DefaultMaxOutputBytes)
	p.maxEvents = cmp.Or(e.MaxOutputEvents, DefaultMaxOutputEvents)
	out, err := p.converse(ctx, t, timeout)
	if err != nil && ctx.Err() != nil {
		p.interrupt(cmp.Or(e.CancelGrace, DefaultCancelGrace))
	}
	p.stop(err == nil)
	agent.ReportStderr(ctx, p.stderr.String(), err)
	if err != nil {
		return "", p.withStderr(err)
	}
	return out, nil
}

// Protocol is the version of the exec protocol that artifactr speaks,
// sent in the turn line as "protocol". Version 1 had no such field and
// gave messages only in history; version 2 adds earlier runs' replies to
// history, and a "role" to every message; version 3 makes steering pulled:
// the program asks with a "steer" line. A program written for an older
// version keeps working, unsteered: its messages wait for the next turn.
const Protocol = 3

// message is a MESSAGE of the protocol: a thread message (role "user"), or
// an earlier run's reply (role "assistant", Run set).
type message struct {
	Seq    uint64 `json:"seq"`
	ID     string `json:"id"`
	Author string `json:"author,omitempty"`
	Text   string `json:"text"`
	Role   string `json:"role"`
	Run    string `json:"run,omitempty"`
}

func wire(m agent.Message) message {
	role := "user"
	if m.Run != "" {
		role = "assistant"
	}
	return message{Seq: m.Seq, ID: m.ID, Author: m.Author, Text: m.Text, Role: role, Run: m.Run}
}

// history is the turn's conversation before its prompt: the thread's
// messages and earlier runs' replies, oldest first, when the turn gives
// them ([agent.Conversational]), else its messages; never nil.
func history(t agent.Turn) []message {
	ms := t.History()
	if ct, ok := t.(agent.Conversational); ok {
		ms = ct.Conversation()
	}
	out := make([]message, 0, len(ms))
	for _, m := range ms {
		out = append(out, wire(m))
	}
	return out
}

// Lines artifactr writes to the program.
type (
	turnLine struct {
		Type     string      `json:"type"` // "turn"
		Protocol int         `json:"protocol"`
		Token    agent.Token `json:"token"`
		Prompt   message     `json:"prompt"`
		History  []message   `json:"history"`
		// W3C trace context of the turn's span; omitted when tracing is off.
		TraceParent string `json:"traceparent,omitempty"`
		TraceState  string `json:"tracestate,omitempty"`
	}
	answerLine struct {
		Type      string  `json:"type"` // "answer"
		RequestID string  `json:"request_id"`
		Message   message `json:"message"`
	}
	steeringLine struct {
		Type     string    `json:"type"` // "steering"
		Messages []message `json:"messages"`
	}
	pageLine struct {
		Type     string    `json:"type"` // "page"
		Messages []message `json:"messages"`
	}
)

// programLine is any line the program writes; Type says which fields count.
type programLine struct {
	Type      string `json:"type"`
	Text      string `json:"text"`       // output
	Question  string `json:"question"`   // ask
	RequestID string `json:"request_id"` // ask, optional
	Output    string `json:"output"`     // done
	Reason    string `json:"reason"`     // error
	Before    uint64 `json:"before"`     // page: messages before this seq
	Limit     int    `json:"limit"`      // page: at most this many
}

// lineEvent is one stdout line, or the error that ended reading.
type lineEvent struct {
	n    int // 1-based line number
	line []byte
	err  error
}

// process is one running program. Only the Run goroutine touches its fields,
// except stderr (written by os/exec) and the channels.
type process struct {
	cmd    *osexec.Cmd
	cancel context.CancelFunc // kills the process group
	stdin  *os.File           // write end
	stdout *os.File           // read end
	stderr *tailBuffer
	lines  chan lineEvent // closed by readLines at EOF
	quit   chan struct{}  // closed by stop to end readLines
	read   chan struct{}  // closed when readLines returns
	waitc  chan error     // receives cmd.Wait's result once
	exited bool           // cmd.Wait has returned
	status error          // cmd.Wait's result
	steer  bool           // answer steer lines with steering (Agent.Steer)
	asks   int            // asks so far, for default request ids

	// The output budget, and what was spent of it.
	maxBytes, maxEvents int
	bytes, events       int
}

func (e Agent) start(ctx context.Context) (*process, error) {
	// Not ctx's child: a cancelled run's program gets a grace period
	// (interrupt) before it is killed.
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cmd := osexec.CommandContext(pctx, e.Path, e.Args...)
	cmd.Dir = e.Dir
	cmd.Env = e.env()
	cmd.WaitDelay = waitDelay
	setProcessGroup(cmd)
	if e.User != "" {
		if err := setUser(cmd, e.User); err != nil {
			cancel()
			return nil, err
		}
	}
	// Our own pipes, not StdinPipe/StdoutPipe: their write deadlines bound
	// writes to a program that stopped reading, and Wait may run while we
	// still read.
	inR, inW, err := os.Pipe()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("exec: pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		cancel()
		closeAll(inR, inW)
		return nil, fmt.Errorf("exec: pipe: %w", err)
	}
	stderr := &tailBuffer{max: stderrTailBytes}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	err = startTracked(cmd.Start, func() int { return cmd.Process.Pid })
	closeAll(inR, outW) // the child holds its own copies
	if err != nil {
		cancel()
		closeAll(inW, outR)
		return nil, fmt.Errorf("exec: start %s: %w", e.Path, err)
	}
	// A cancelled run must not stay blocked writing to a stuck program.
	context.AfterFunc(pctx, func() { _ = inW.Close() })
	context.AfterFunc(ctx, func() { _ = inW.Close() })
	p := &process{
		cmd: cmd, cancel: cancel, stdin: inW, stdout: outR, stderr: stderr, steer: e.Steer,
		lines: make(chan lineEvent), quit: make(chan struct{}),
		read: make(chan struct{}), waitc: make(chan error, 1),
	}
	go func() {
		err := cmd.Wait()
		forget(cmd.Process.Pid)
		p.waitc <- err
	}()
	go p.readLines()
	return p, nil
}

// converse talks to the program for one turn, its outputs coalesced into
// few run_output events. It returns the final output, or the error that
// ends the turn.
func (p *process) converse(ctx context.Context, t agent.Turn, timeout time.Duration) (string, error) {
	b := newBudget(timeout)
	defer b.timer.Stop()
	em := agent.NewCoalescer(func(ctx context.Context, text string) error { return p.emit(ctx, t, b, text) }, flushEvery, flushBytes)
	defer em.Stop()
	out, err := p.loop(ctx, t, b, em)
	if err == nil || ctx.Err() == nil {
		// Written before the run's end: on a failure too, what the
		// program said is kept. After a timeout this fails at once.
		if ferr := em.Flush(ctx); err == nil {
			err = ferr
		}
	}
	if err != nil {
		return "", err
	}
	return out, nil
}

// loop is the turn's loop: each case handles one input and carries out
// its effect. It returns the final output, or the error that ends the turn.
func (p *process) loop(ctx context.Context, t agent.Turn, b *budget, em *agent.Coalescer) (string, error) {
	first := turnLine{Type: "turn", Protocol: Protocol, Token: t.Token(), Prompt: wire(t.Prompt()), History: history(t)}
	first.TraceParent, first.TraceState = traceContext(ctx)
	if err := p.send(ctx, b, first); err != nil {
		return "", err
	}
	lines, waitc := p.lines, p.waitc
	var drain <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("exec: %w", context.Cause(ctx))
		case <-b.timer.C:
			return "", b.timedOut()
		case <-drain:
			return "", p.exitedBeforeDone()
		case <-em.Due():
			if err := em.Flush(ctx); err != nil {
				return "", err
			}
		case status := <-waitc:
			p.exited, p.status, waitc = true, status, nil
			if lines == nil {
				return "", p.exitedBeforeDone()
			}
			// Lines may still be buffered in the pipe; read them first.
			timer := time.NewTimer(exitDrain)
			defer timer.Stop()
			drain = timer.C
		case ev, ok := <-lines:
			if !ok {
				lines = nil
				if p.exited {
					return "", p.exitedBeforeDone()
				}
				continue // stdout closed; wait for exit or timeout
			}
			out, done, err := p.handle(ctx, t, b, em, ev)
			if err != nil || done {
				return out, err
			}
		}
	}
}

// handle carries out one stdout line. done reports that the turn is over.
func (p *process) handle(ctx context.Context, t agent.Turn, b *budget, em *agent.Coalescer, ev lineEvent) (out string, done bool, err error) {
	if ev.err != nil {
		if errors.Is(ev.err, bufio.ErrTooLong) {
			return "", true, fmt.Errorf("exec: line %d longer than %d bytes", ev.n, maxLineBytes)
		}
		return "", true, fmt.Errorf("exec: read stdout: %w", ev.err)
	}
	if len(bytes.TrimSpace(ev.line)) == 0 {
		return "", false, nil // blank lines are harmless
	}
	var l programLine
	if err := json.Unmarshal(ev.line, &l); err != nil {
		return "", true, fmt.Errorf("exec: malformed line %d: %s: %v", ev.n, quote(ev.line), err)
	}
	switch l.Type {
	case "output":
		if err := p.spend(len(l.Text), 0); err != nil {
			return "", true, err
		}
		if err := em.Add(ctx, l.Text); err != nil {
			return "", true, err
		}
		return "", false, nil
	case "ask":
		// The outputs before the question are recorded before it.
		if err := em.Flush(ctx); err != nil {
			return "", true, err
		}
		if err := p.spend(len(l.Question), 1); err != nil {
			return "", true, err
		}
		return "", false, p.ask(ctx, t, b, l)
	case "steer":
		// The outputs before the checkpoint are recorded before the
		// steering that follows it.
		if err := em.Flush(ctx); err != nil {
			return "", true, err
		}
		return "", false, p.steering(ctx, t, b)
	case "page":
		return "", false, p.page(ctx, t, b, l)
	case "done":
		if err := p.spend(len(l.Output), 0); err != nil {
			return "", true, err
		}
		return l.Output, true, nil
	case "error":
		return "", true, fmt.Errorf("exec: program error: %s", l.Reason)
	default:
		return "", true, fmt.Errorf("exec: unknown type %q on line %d: %s", l.Type, ev.n, quote(ev.line))
	}
}

// spend takes n bytes and events events from the output budget, or fails
// the turn when they are past it.
func (p *process) spend(n, events int) error {
	p.bytes += n
	p.events += events
	switch {
	case p.bytes > p.maxBytes:
		return fmt.Errorf("exec: output over the run's budget of %d bytes (serve --exec-max-output-bytes); the program was killed", p.maxBytes)
	case p.events > p.maxEvents:
		return fmt.Errorf("exec: output over the run's budget of %d events (serve --exec-max-output-events); the program was killed", p.maxEvents)
	}
	return nil
}

// emit records coalesced output as one run_output event. It waits while
// the store is behind (Turn.Emit holds a fast writer back), but no longer
// than the turn's time limit.
func (p *process) emit(ctx context.Context, t agent.Turn, b *budget, text string) error {
	if err := p.spend(0, 1); err != nil {
		return err
	}
	ectx, cancel := context.WithDeadline(ctx, b.deadline())
	defer cancel()
	err := t.Emit(ectx, text)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("exec: %w", context.Cause(ctx))
	case ectx.Err() != nil:
		return b.timedOut()
	}
	return fmt.Errorf("exec: emit: %w", err)
}

// ask opens a request for the program and writes the answer back. The turn's
// clock stops meanwhile.
func (p *process) ask(ctx context.Context, t agent.Turn, b *budget, l programLine) error {
	p.asks++
	id := l.RequestID
	if id == "" {
		id = strconv.Itoa(p.asks)
	}
	b.pause()
	answer, err := t.Ask(ctx, l.Question)
	b.resume()
	if err != nil {
		return fmt.Errorf("exec: ask: %w", err)
	}
	return p.send(ctx, b, answerLine{Type: "answer", RequestID: id, Message: wire(answer)})
}

// steering answers a steer line: the messages posted since the turn started
// that no run has taken, each consumed by this run, or none when the agent
// is not steerable.
func (p *process) steering(ctx context.Context, t agent.Turn, b *budget) error {
	line := steeringLine{Type: "steering", Messages: []message{}}
	if p.steer {
		msgs, err := t.Steer(ctx)
		if err != nil {
			return fmt.Errorf("exec: steer: %w", err)
		}
		size, i := 0, len(msgs)
		for i > 0 && (i == len(msgs) || size+len(msgs[i-1].Text) <= maxPageBytes) {
			i--
			size += len(msgs[i].Text)
		}
		for _, m := range msgs[i:] {
			line.Messages = append(line.Messages, wire(m))
		}
	}
	return p.send(ctx, b, line)
}

// Bounds of a page line: limit 0 asks for defaultPage messages; more than
// maxPage, or more than maxPageBytes of text, are never sent at once (the
// newest are kept; the program pages on from the oldest it got).
const (
	defaultPage  = 256
	maxPage      = 1024
	maxPageBytes = 4 << 20
)

// page answers a page line with the newest messages before l.Before (the
// prompt when 0), read from the log ([agent.Pager]), oldest first.
func (p *process) page(ctx context.Context, t agent.Turn, b *budget, l programLine) error {
	if l.Limit < 0 {
		return fmt.Errorf("exec: page line with limit %d: want 0 (for %d) to %d", l.Limit, defaultPage, maxPage)
	}
	before, n := l.Before, l.Limit
	if before == 0 {
		before = t.Prompt().Seq
	}
	if n == 0 {
		n = defaultPage
	}
	line := pageLine{Type: "page", Messages: []message{}}
	if pg, ok := t.(agent.Pager); ok {
		msgs, err := pg.MessagesBefore(ctx, before, min(n, maxPage))
		if err != nil {
			return fmt.Errorf("exec: page before %d: %w", before, err)
		}
		size, i := 0, len(msgs)
		for i > 0 && (i == len(msgs) || size+len(msgs[i-1].Text) <= maxPageBytes) {
			i--
			size += len(msgs[i].Text)
		}
		for _, m := range msgs[i:] {
			line.Messages = append(line.Messages, wire(m))
		}
	}
	return p.send(ctx, b, line)
}

// send writes one line to stdin. A program that stopped reading stdin is not
// an error by itself: it will exit or answer, and that is reported instead.
func (p *process) send(ctx context.Context, b *budget, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("exec: encode: %w", err) // not reachable: plain structs
	}
	_ = p.stdin.SetWriteDeadline(b.deadline())
	_, err = p.stdin.Write(append(data, '\n'))
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("exec: %w", context.Cause(ctx))
	case errors.Is(err, os.ErrDeadlineExceeded):
		return b.timedOut()
	default:
		return nil // EPIPE: the program closed stdin or exited
	}
}

// readLines feeds stdout lines to converse until EOF, an error, or quit.
func (p *process) readLines() {
	defer close(p.read)
	defer close(p.lines)
	sc := bufio.NewScanner(p.stdout)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes)
	n := 0
	for sc.Scan() {
		n++
		select {
		case p.lines <- lineEvent{n: n, line: bytes.Clone(sc.Bytes())}:
		case <-p.quit:
			return
		}
	}
	if err := sc.Err(); err != nil {
		select {
		case p.lines <- lineEvent{n: n + 1, err: err}:
		case <-p.quit:
		}
	}
}

// stop ends the program and reaps it. After done, the program gets EOF on
// stdin and doneGrace to exit; otherwise, and after that, it is killed. Then
// what is left of its process group is killed too. Both goroutines of start
// have returned when stop returns.
func (p *process) stop(graceful bool) {
	_ = p.stdin.Close()
	if !p.exited && graceful {
		timer := time.NewTimer(doneGrace)
		select {
		case status := <-p.waitc:
			p.exited, p.status = true, status
		case <-timer.C:
		}
		timer.Stop()
	}
	if !p.exited {
		// While the program lives its descendants are found through it,
		// those that left its process group (setsid) too.
		killTree(p.cmd.Process.Pid)
	}
	p.cancel()
	if !p.exited {
		p.exited, p.status = true, <-p.waitc
	}
	killGroup(p.cmd) // children left behind must not outlive the turn
	sweepOrphans()   // and those whose parent exited, when serve reaps them
	close(p.quit)
	_ = p.stdout.Close()
	<-p.read
}

// interrupt asks the program of a cancelled run to stop: SIGTERM to its
// process group, and EOF on stdin (closed when the run's context ended). It
// waits up to grace for the program to exit; stop kills it after that.
func (p *process) interrupt(grace time.Duration) {
	if p.exited {
		return
	}
	_ = p.stdin.Close()
	termGroup(p.cmd)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case status := <-p.waitc:
		p.exited, p.status = true, status
	case <-timer.C:
	}
}

// exitedBeforeDone describes a program that ended without done.
func (p *process) exitedBeforeDone() error {
	var ee *osexec.ExitError
	switch {
	case p.status == nil || errors.Is(p.status, osexec.ErrWaitDelay):
		return errors.New("exec: program exited with status 0 before done")
	case errors.As(p.status, &ee) && ee.Exited():
		return fmt.Errorf("exec: program exited with status %d before done", ee.ExitCode())
	case errors.As(p.status, &ee):
		return fmt.Errorf("exec: program ended (%s) before done", ee)
	default:
		return fmt.Errorf("exec: program failed before done: %w", p.status)
	}
}

// withStderr adds the stderr tail to err. Call it only after stop, when
// os/exec has finished copying stderr.
func (p *process) withStderr(err error) error {
	tail := strings.TrimSpace(p.stderr.String())
	if tail == "" {
		return err
	}
	return fmt.Errorf("%w; stderr: %s", err, tail)
}

// budget is the turn's timeout, paused while waiting for an answer.
type budget struct {
	total time.Duration
	left  time.Duration // as of since
	since time.Time
	timer *time.Timer
}

func newBudget(d time.Duration) *budget {
	return &budget{total: d, left: d, since: nowFunc(), timer: time.NewTimer(d)}
}

func (b *budget) pause() {
	b.timer.Stop()
	b.left -= nowFunc().Sub(b.since)
}

func (b *budget) resume() {
	b.since = nowFunc()
	b.timer.Reset(max(b.left, 0))
}

func (b *budget) deadline() time.Time { return b.since.Add(b.left) }

func (b *budget) timedOut() error {
	return fmt.Errorf("exec: timed out after %s", formatDuration(b.total))
}

// formatDuration writes whole seconds as "60s" rather than "1m0s".
func formatDuration(d time.Duration) string {
	if d >= time.Second && d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

// quote quotes a line for an error, truncated to quoteBytes.
func quote(line []byte) string {
	if len(line) <= quoteBytes {
		return strconv.Quote(string(line))
	}
	return strconv.Quote(string(line[:quoteBytes])) + "..."
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}
