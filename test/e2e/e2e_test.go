package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
)

// TestServe_embedded: serve embeds NATS; post --wait returns the echo
// answer; a request is answered by a later post; SIGTERM stops cleanly; the
// data survives a restart.
func TestServe_embedded(t *testing.T) {
	listen := freeListen(t)
	data := filepath.Join(t.TempDir(), "data")
	url := "nats://" + listen
	s := serve(t, "serve-1", "--data", data, "--listen", listen, "--claim-ttl", "2s")
	if out := s.out.String(); !strings.Contains(out, url) || !strings.Contains(out, data) {
		t.Errorf("serve does not say where it listens and keeps data:\n%s", out)
	}

	code, out, errOut := cli(t, "post", "t1", "hello", "--wait", "--nats", url)
	if code != 0 || !strings.Contains(out, "echo: hello") {
		t.Fatalf("post --wait: exit %d\n%s%s", code, out, errOut)
	}
	askAndAnswer(t, url, "t2", "your name?", "Ada", "echo: your name? -> Ada")

	s.signal(syscall.SIGTERM)
	if code := s.wait(20 * time.Second); code != 0 {
		t.Fatalf("serve after SIGTERM: exit %d", code)
	}
	if !strings.Contains(s.out.String(), "stopped:") {
		t.Errorf("serve did not report its stop:\n%s", s.out.String())
	}

	s2 := serve(t, "serve-2", "--data", data, "--listen", listen)
	code, out, _ = cli(t, "show", "t1", "--nats", url)
	if code != 0 || !strings.Contains(out, "echo: hello") {
		t.Errorf("after restart, show t1: exit %d\n%s", code, out)
	}
	auditClean(t, url)
	s2.signal(syscall.SIGINT)
	if code := s2.wait(20 * time.Second); code != 0 {
		t.Errorf("serve after SIGINT: exit %d", code)
	}
}

// askAndAnswer runs the README tour's ask/answer step as pasted: post
// "ask: question" --wait returns once the run asks; post answer --wait then
// answers it and prints want.
func askAndAnswer(t *testing.T, url, thread, question, answer, want string) {
	t.Helper()
	code, out, errOut := cli(t, "post", thread, "ask: "+question, "--wait", "--nats", url)
	if code != 0 || !strings.Contains(out, "asks: "+question) {
		t.Fatalf("post --wait of the ask: exit %d, want it to print the question\n%s%s", code, out, errOut)
	}
	code, out, errOut = cli(t, "post", thread, answer, "--wait", "--nats", url)
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("post --wait of the answer: exit %d, want %q\n%s%s", code, want, out, errOut)
	}
}

// TestServe_tourAskAnswer: the README tour's commands, pasted one after the
// other against the built binary, work every time: the answer is never
// taken as a new prompt.
func TestServe_tourAskAnswer(t *testing.T) {
	listen := freeListen(t)
	url := "nats://" + listen
	serve(t, "serve-tour", "--data", t.TempDir(), "--listen", listen, "--no-sync")
	for i := range 8 {
		code, out, errOut := cli(t, "post", "t1", fmt.Sprintf("hello %d", i), "--wait", "--nats", url)
		if code != 0 || !strings.Contains(out, fmt.Sprintf("echo: hello %d", i)) {
			t.Fatalf("round %d: post --wait: exit %d\n%s%s", i, code, out, errOut)
		}
		askAndAnswer(t, url, "t1", "what is your name?", "Ada", "echo: what is your name? -> Ada")
	}
	code, out, _ := cli(t, "show", "t1", "--nats", url)
	if code != 0 || strings.Contains(out, "anomal") || strings.Contains(out, "echo: Ada") {
		t.Errorf("show t1: exit %d; an answer became a prompt, or anomalies:\n%s", code, out)
	}
	auditClean(t, url)
}

// TestServe_execAgent: the example Python agent answers through the exec
// protocol, requests included.
func TestServe_execAgent(t *testing.T) {
	listen := freeListen(t)
	url := "nats://" + listen
	script := filepath.Join(repoRoot, "examples", "echo-agent.py")
	serve(t, "serve-exec", "--data", t.TempDir(), "--listen", listen, "--no-sync",
		"--agent", "exec", "--", "python3", script)
	code, out, errOut := cli(t, "post", "p1", "hi there", "--wait", "--nats", url)
	if code != 0 || !strings.Contains(out, "py-echo: hi there") {
		t.Fatalf("post --wait: exit %d\n%s%s", code, out, errOut)
	}
	askAndAnswer(t, url, "p2", "favourite colour?", "blue", "py-echo: favourite colour? -> blue")
}

// TestServe_kill9Takeover: a runner killed with SIGKILL while its runs are
// active leaves its claims behind; a second runner takes the threads over
// within the claim TTL plus a margin, abandons the dead runs and answers
// every later message; the log shows every message consumed exactly once.
// Spec: Lapse, then Claim by another holder.
func TestServe_kill9Takeover(t *testing.T) {
	const ttl = 2 * time.Second
	srv := natsembedtest.RunForTest(t) // outlives the runners
	url := srv.ClientURL()
	store := openStore(t, url)
	threads := []string{"k1", "k2", "k3"}

	a := serve(t, "runner-A", "--nats", url, "--claim-ttl", ttl.String(), "--echo-delay", "10m", "--runner-id", "A")
	for _, th := range threads {
		postMsg(t, store, th, "first")
	}
	testkit.CheckFor(t, 20*time.Second, func() error {
		for _, th := range threads {
			v, err := fold(t, store, th)
			if err != nil {
				return err
			}
			if v.ActiveRun == nil || !strings.HasPrefix(v.ActiveRun.Holder, "A/") {
				return fmt.Errorf("%s: no run of A active", th)
			}
		}
		return nil
	})
	for _, th := range threads {
		postMsg(t, store, th, "second") // waits behind the active run
	}
	a.kill9()
	killed := time.Now()

	serve(t, "runner-B", "--nats", url, "--claim-ttl", ttl.String(), "--runner-id", "B")
	views := map[string]*projections.Thread{}
	testkit.CheckFor(t, 30*time.Second, func() error {
		for _, th := range threads {
			v, err := settled(t, store, th, 2)
			if err != nil {
				return err
			}
			views[th] = v
		}
		return nil
	})
	// B starts after the kill, so the margin covers its start-up and the
	// session's TTL, after which B's lease watch sees the session lapse.
	if d := time.Since(killed); d > ttl+15*time.Second {
		t.Errorf("takeover took %s; want within the claim TTL %s plus a margin", d, ttl)
	}
	for _, th := range threads {
		v := views[th]
		consumedOnce(t, v)
		if len(v.Runs) != 2 {
			t.Fatalf("%s: %d runs, want 2 (A's abandoned, B's)", th, len(v.Runs))
		}
		dead, next := v.Runs[0], v.Runs[1]
		if dead.Status != projections.RunAbandoned || !strings.HasPrefix(dead.Holder, "A/") {
			t.Errorf("%s: first run %s is %s by %s; want abandoned, started by A", th, dead.ID, dead.Status, dead.Holder)
		}
		if next.Status != projections.RunCompleted || !strings.HasPrefix(next.Holder, "B/") || next.Output != "echo: second" {
			t.Errorf("%s: second run %s is %s by %s with %q; want completed by B", th, next.ID, next.Status, next.Holder, next.Output)
		}
	}
	code, out, errOut := cli(t, "post", "k1", "third", "--wait", "--nats", url)
	if code != 0 || !strings.Contains(out, "echo: third") {
		t.Errorf("post --wait after the takeover: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = cli(t, "post", "k1", "late", "--wait", "--nats", url, "--wait-timeout", "30s")
	if code != 0 || !strings.Contains(out, "echo: late") {
		t.Errorf("second post --wait: exit %d\n%s", code, out)
	}
	auditClean(t, url)
}

// TestServe_sharing: two runners on one NATS share the threads: both hold
// claims and both complete runs.
func TestServe_sharing(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	url := srv.ClientURL()
	store := openStore(t, url)
	serve(t, "runner-S1", "--nats", url, "--runner-id", "S1")
	serve(t, "runner-S2", "--nats", url, "--runner-id", "S2")

	claimed, completed := map[string]bool{}, map[string]bool{}
	// Each round races the runners for fresh threads; one round almost
	// always splits them, more rounds make a one-sided outcome vanishingly
	// rare.
	for round := 0; round < 6 && !(len(claimed) == 2 && len(completed) == 2); round++ {
		var threads []string
		for i := range 8 {
			th := fmt.Sprintf("s%d-%d", round, i)
			threads = append(threads, th)
			postMsg(t, store, th, "hello "+th)
		}
		testkit.CheckFor(t, 30*time.Second, func() error {
			for _, th := range threads {
				if _, err := settled(t, store, th, 1); err != nil {
					return err
				}
			}
			return nil
		})
		for _, th := range threads {
			v, _ := fold(t, store, th)
			consumedOnce(t, v)
			runner, _, _ := strings.Cut(v.Claim.Holder, "/")
			claimed[runner] = true
			for _, r := range v.Runs {
				if r.Status == projections.RunCompleted && r.Output == "echo: hello "+th {
					runner, _, _ := strings.Cut(r.Holder, "/")
					completed[runner] = true
				}
			}
		}
	}
	if !claimed["S1"] || !claimed["S2"] || !completed["S1"] || !completed["S2"] {
		t.Errorf("the runners did not share the work: claims by %v, completed runs by %v", claimed, completed)
	}
	auditClean(t, url)
}

// TestServe_sigtermHandsOver: SIGTERM lets active runs finish, releases
// every claim and exits 0; the log then shows no active run and no held
// claim, and another runner picks up the messages left pending.
func TestServe_sigtermHandsOver(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	url := srv.ClientURL()
	store := openStore(t, url)
	threads := []string{"g1", "g2"}

	a := serve(t, "runner-T1", "--nats", url, "--runner-id", "T1", "--claim-ttl", "2s",
		"--echo-delay", "1s", "--shutdown-grace", "15s")
	for _, th := range threads {
		postMsg(t, store, th, "first")
	}
	testkit.CheckFor(t, 20*time.Second, func() error {
		for _, th := range threads {
			v, err := fold(t, store, th)
			if err != nil {
				return err
			}
			if v.ActiveRun == nil {
				return fmt.Errorf("%s: no run active", th)
			}
		}
		return nil
	})
	for _, th := range threads {
		postMsg(t, store, th, "second")
	}
	a.signal(syscall.SIGTERM)
	if code := a.wait(30 * time.Second); code != 0 {
		t.Fatalf("serve after SIGTERM: exit %d", code)
	}
	for _, th := range threads {
		v, err := fold(t, store, th)
		if err != nil {
			t.Fatal(err)
		}
		if v.ActiveRun != nil {
			t.Errorf("%s: run %s left active after SIGTERM", th, v.ActiveRun.ID)
		}
		if v.Claim.Seq == 0 || !v.Claim.Released {
			t.Errorf("%s: claim %d by %s not released after SIGTERM", th, v.Claim.Seq, v.Claim.Holder)
		}
		for _, r := range v.Runs {
			if r.Status != projections.RunCompleted {
				t.Errorf("%s: run %s is %s (%s); want it completed within the grace", th, r.ID, r.Status, r.Reason)
			}
		}
	}

	serve(t, "runner-T2", "--nats", url, "--runner-id", "T2", "--claim-ttl", "2s")
	testkit.CheckFor(t, 30*time.Second, func() error {
		for _, th := range threads {
			if _, err := settled(t, store, th, 2); err != nil {
				return err
			}
		}
		return nil
	})
	for _, th := range threads {
		v, _ := fold(t, store, th)
		consumedOnce(t, v)
		last := v.Runs[len(v.Runs)-1]
		if !strings.HasPrefix(last.Holder, "T2/") || last.Output != "echo: second" {
			t.Errorf("%s: the pending message went to %s (%s, %q); want T2's run", th, last.ID, last.Holder, last.Output)
		}
	}
	auditClean(t, url)
}

// TestServe_dataDirLock: a second serve on a data directory in use exits 1
// at once, naming the directory and the first one's pid, while the first
// keeps serving; kill -9 of the holder frees the directory, and a restart
// finds every acked post (issue 12, blocker 1).
func TestServe_dataDirLock(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	listen := freeListen(t)
	url := "nats://" + listen
	a := serve(t, "serve-A", "--data", data, "--listen", listen, "--no-sync")
	code, out, errOut := cli(t, "post", "t1", "one", "--wait", "--nats", url)
	if code != 0 || !strings.Contains(out, "echo: one") {
		t.Fatalf("post to A: exit %d\n%s%s", code, out, errOut)
	}

	b := start(t, "serve-B", "serve", "--data", data, "--listen", freeListen(t), "--no-sync", "--log-level", "warn")
	if code := b.wait(20 * time.Second); code != 1 {
		t.Fatalf("second serve on %s: exit %d, want 1", data, code)
	}
	for _, want := range []string{data, "in use", fmt.Sprintf("pid %d", a.cmd.Process.Pid)} {
		if !strings.Contains(b.errOut.String(), want) {
			t.Errorf("second serve's error lacks %q:\n%s", want, b.errOut.String())
		}
	}
	code, out, errOut = cli(t, "post", "t1", "two", "--wait", "--nats", url)
	if code != 0 || !strings.Contains(out, "echo: two") {
		t.Fatalf("post to A after B was refused: exit %d\n%s%s", code, out, errOut)
	}

	// A second serve on A's port, with a directory of its own.
	other := filepath.Join(t.TempDir(), "other")
	c := start(t, "serve-C", "serve", "--data", other, "--listen", listen, "--no-sync", "--log-level", "warn")
	if code := c.wait(20 * time.Second); code != 1 {
		t.Fatalf("serve on A's port: exit %d, want 1", code)
	}
	if !strings.Contains(c.errOut.String(), listen) {
		t.Errorf("serve on a taken port does not name %s:\n%s", listen, c.errOut.String())
	}

	a.kill9()
	serve(t, "serve-A2", "--data", data, "--listen", listen, "--no-sync")
	code, out, _ = cli(t, "show", "t1", "--nats", url)
	if code != 0 || !strings.Contains(out, "echo: one") || !strings.Contains(out, "echo: two") {
		t.Errorf("after kill -9 and restart, show t1: exit %d\n%s", code, out)
	}
	auditClean(t, url)
}
