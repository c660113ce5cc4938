package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
)

var (
	bin      string // the artifactr binary TestMain built
	repoRoot string
)

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	root, err := filepath.Abs("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	repoRoot = root
	dir, err := os.MkdirTemp("", "artifactr-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "artifactr")
	build := exec.Command("go", "build", "-o", bin, "./cmd/artifactr")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build ./cmd/artifactr: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// childEnv is the test's environment without ARTIFACTR_NATS and NATS_URL,
// so that a serve embeds its server unless told --nats.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ARTIFACTR_NATS=") && !strings.HasPrefix(kv, "NATS_URL=") {
			env = append(env, kv)
		}
	}
	return env
}

// proc is a running artifactr process.
type proc struct {
	t           *testing.T
	name        string
	cmd         *exec.Cmd
	out, errOut testkit.SyncBuffer
	done        chan struct{} // closed when the process has exited
	code        int           // exit code; -1 when killed by a signal
}

// start starts artifactr with args in a temporary working directory. It is
// killed, if still running, when the test ends.
func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = t.TempDir()
	p.cmd.Env = childEnv()
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errOut
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		err := p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		if err != nil && p.code == 0 {
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s stdout:\n%s\n%s stderr (last 4 KiB):\n%s", name, p.out.String(), name, tail(p.errOut.String(), 4096))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// serve starts `artifactr serve` and waits until its runner is ready.
func serve(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := start(t, name, append([]string{"serve", "--log-level", "warn"}, args...)...)
	p.waitOutput(" ready on stream ", 20*time.Second)
	return p
}

// waitOutput waits until the process's stdout contains s.
func (p *proc) waitOutput(s string, d time.Duration) {
	p.t.Helper()
	testkit.CheckFor(p.t, d, func() error {
		if strings.Contains(p.out.String(), s) {
			return nil
		}
		select {
		case <-p.done:
			p.t.Fatalf("%s exited %d before printing %q; stderr:\n%s", p.name, p.code, s, tail(p.errOut.String(), 4096))
		default:
		}
		return fmt.Errorf("%s has not printed %q", p.name, s)
	})
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %s to %s: %v", sig, p.name, err)
	}
}

// kill9 kills the process with SIGKILL, as a crash would, and waits for it.
func (p *proc) kill9() {
	p.t.Helper()
	p.signal(syscall.SIGKILL)
	<-p.done
}

// wait waits up to d for the process to exit and returns its exit code.
func (p *proc) wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(d):
		p.t.Fatalf("%s still running after %s", p.name, d)
		return 0
	}
}

// cli runs an artifactr client command to its end.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = childEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("artifactr %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// freeListen returns a loopback host:port nothing listens on now.
func freeListen(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// openStore connects the test itself to the NATS at url.
func openStore(t *testing.T, url string) *natsstore.Store {
	t.Helper()
	s, err := natsstore.New(t.Context(), natsstore.Config{URL: url})
	if err != nil {
		t.Fatalf("natsstore.New(%s): %v", url, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func postMsg(t *testing.T, s events.Store, thread, text string) uint64 {
	t.Helper()
	ack, err := s.Post(t.Context(), thread, &eventspb.MessagePosted{Text: text, Author: "e2e"})
	if err != nil {
		t.Fatalf("post to %s: %v", thread, err)
	}
	return ack.Seq
}

// fold replays thread from the store.
func fold(t *testing.T, s events.Store, thread string) (*projections.Thread, error) {
	envs, err := s.Load(t.Context(), thread, 1)
	if err != nil {
		return nil, err
	}
	return projections.Fold(thread, envs), nil
}

// settled folds thread and returns an error unless it has at least
// messages messages, none pending, and no run active.
func settled(t *testing.T, s events.Store, thread string, messages int) (*projections.Thread, error) {
	v, err := fold(t, s, thread)
	if err != nil {
		return nil, err
	}
	switch {
	case len(v.Messages) < messages:
		return v, fmt.Errorf("%s: %d of %d messages", thread, len(v.Messages), messages)
	case len(v.Pending()) > 0:
		return v, fmt.Errorf("%s: %d messages pending", thread, len(v.Pending()))
	case v.ActiveRun != nil:
		return v, fmt.Errorf("%s: run %s still active", thread, v.ActiveRun.ID)
	}
	return v, nil
}

// consumedOnce checks that every message of v was consumed, and that the
// fold found no anomaly (a second consumption would be one).
func consumedOnce(t *testing.T, v *projections.Thread) {
	t.Helper()
	for _, m := range v.Messages {
		if m.Consumed == nil {
			t.Errorf("%s: message %d %q was never consumed", v.ID, m.Seq, m.Text)
		}
	}
	for _, a := range v.Anomalies {
		t.Errorf("%s: anomaly at %d (%s): %s", v.ID, a.Seq, a.Type, a.Reason)
	}
}

// auditClean runs `artifactr audit` against url and requires a clean log.
func auditClean(t *testing.T, url string) {
	t.Helper()
	code, out, errOut := cli(t, "audit", "--nats", url)
	if code != 0 || !strings.Contains(out, "audit OK") {
		t.Errorf("audit: exit %d\n%s%s", code, out, errOut)
	}
}
