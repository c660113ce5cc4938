package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsauth"
	"github.com/artifactr/artifactr/internal/natsauth/authtest"
	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/internal/testkit"
)

// seedOf reads a seed file serve --auth wrote.
func seedOf(t *testing.T, path string) []byte {
	t.Helper()
	k, err := natsauth.ReadSeedFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return k.Seed
}

// refused checks that call failed because the server refused nc a publish
// to subject for want of permission.
func refused(t *testing.T, nc *nats.Conn, subject string, call func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	err := call(ctx)
	if err == nil {
		t.Errorf("%s: accepted, want a permission error", subject)
		return
	}
	last := nc.LastError()
	if !errors.Is(last, nats.ErrPermissionViolation) || !strings.Contains(last.Error(), `"`+subject+`"`) {
		t.Errorf("%s: failed with %v, last connection error %v; want a permissions violation", subject, err, last)
	}
}

// serve --auth: the seeds are made with mode 0600 and printed; a client
// can post, an auditor can audit and not post, and nobody without a key
// gets in. Spec: issue 10 tests "With --auth".
func TestRun_serveAuth(t *testing.T) {
	data := t.TempDir()
	url, out, _ := startServeArgs(t, "--auth", "--data", data, "--listen", "127.0.0.1:0", "--claim-ttl", "2s", "--idle-timeout", "200ms")
	auth := filepath.Join(data, "auth")
	for _, r := range []natsauth.Role{natsauth.Client, natsauth.Auditor, natsauth.Admin} {
		p := filepath.Join(auth, natsauth.SeedFile(r))
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want mode 0600", p, err, st)
		}
		if !strings.Contains(out.String(), "--nkey "+p) {
			t.Errorf("serve does not print %s:\n%s", p, out.String())
		}
	}
	if _, err := os.Stat(filepath.Join(auth, "runner.nk")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the runner's seed is on disk (%v); it stays in memory", err)
	}
	ctx := t.Context()
	client := []string{"--nats", url, "--nkey", filepath.Join(auth, "client.nk")}
	auditor := []string{"--nats", url, "--nkey", filepath.Join(auth, "auditor.nk")}

	code, _, errOut := runCLI(t, ctx, "threads", "--nats", url)
	if code != exitFail || !strings.Contains(errOut, "refused the credentials") {
		t.Errorf("threads without a key: exit %d, stderr:\n%s", code, errOut)
	}
	code, stdout, errOut := runCLI(t, ctx, append([]string{"post", "t1", "hello", "--wait"}, client...)...)
	if code != exitOK || !strings.Contains(stdout, "echo: hello") {
		t.Fatalf("post as client: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, errOut)
	}
	// A request and its answer: the runner's fenced answer_given.
	if code, stdout, errOut := runCLI(t, ctx, append([]string{"post", "t1", "ask: name?"}, client...)...); code != exitOK {
		t.Fatalf("post ask: exit %d\n%s\n%s", code, stdout, errOut)
	}
	code, stdout, errOut = runCLI(t, ctx, append([]string{"post", "t1", "Ada", "--wait"}, client...)...)
	if code != exitOK || !strings.Contains(stdout, "name? -> Ada") {
		t.Fatalf("answer as client: exit %d\n%s\n%s", code, stdout, errOut)
	}
	for _, args := range [][]string{{"threads"}, {"show", "t1"}, {"projections", "status"}} {
		if code, stdout, errOut := runCLI(t, ctx, append(args, client...)...); code != exitOK {
			t.Errorf("%v as client: exit %d\n%s\n%s", args, code, stdout, errOut)
		}
	}
	// Idle claims are released (a KV delete and thread_released) and
	// taken again by the next post.
	testkit.CheckFor(t, 10*time.Second, func() error {
		_, out, _ := runCLI(t, ctx, append([]string{"show", "t1", "--json"}, client...)...)
		var v threadView
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			return err
		}
		if v.Claim == nil || !v.Claim.Released {
			return fmt.Errorf("claim not released yet: %+v", v.Claim)
		}
		return nil
	})
	if code, stdout, errOut := runCLI(t, ctx, append([]string{"post", "t1", "after release", "--wait"}, client...)...); code != exitOK || !strings.Contains(stdout, "echo: after release") {
		t.Errorf("post after release: exit %d\n%s\n%s", code, stdout, errOut)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if code, stdout, errOut := runCLI(t, wctx, append([]string{"watch", "t1", "--from", "all", "--json"}, client...)...); code != exitOK || !strings.Contains(stdout, "message_posted") {
		t.Errorf("watch as client: exit %d\n%s\n%s", code, stdout, errOut)
	}
	code, stdout, errOut = runCLI(t, ctx, append([]string{"audit"}, auditor...)...)
	if code != exitOK || !strings.Contains(stdout, "audit OK") {
		t.Errorf("audit as auditor: exit %d\n%s\n%s", code, stdout, errOut)
	}
	code, _, errOut = runCLI(t, ctx, append([]string{"post", "t1", "not allowed", "--timeout", "2s"}, auditor...)...)
	if code != exitFail || !strings.Contains(errOut, "permission denied") || !strings.Contains(errOut, "threads.t1.posted") {
		t.Errorf("post as auditor: exit %d, stderr:\n%s", code, errOut)
	}
	// A group-readable seed is refused before connecting.
	loose := filepath.Join(t.TempDir(), "loose.nk")
	raw, _ := os.ReadFile(filepath.Join(auth, "client.nk"))
	if err := os.WriteFile(loose, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, ctx, "threads", "--nats", url, "--nkey", loose)
	if code != exitUsage || !strings.Contains(errOut, "chmod 600") {
		t.Errorf("threads with a 0644 seed: exit %d, stderr:\n%s", code, errOut)
	}
}

// Every forgery of issue 10's table, tried with client credentials (what
// an agent, or anyone who posts, holds), is refused by a permission and
// leaves the log as it was: the runtime has nothing to act on. The two
// that need a writer on the run subject without the protocol's checks
// are the audit's (projections/audit: RunChain, FenceNewestClaim); the
// one that follows the protocol with runner credentials is what these
// permissions exist for.
func TestRun_serveAuth_forgeriesRefused(t *testing.T) {
	data := t.TempDir()
	url, _, _ := startServeArgs(t, "--auth", "--data", data, "--listen", "127.0.0.1:0", "--claim-ttl", "2s")
	ctx := t.Context()
	auth := filepath.Join(data, "auth")
	client := []string{"--nats", url, "--nkey", filepath.Join(auth, "client.nk")}
	if code, stdout, errOut := runCLI(t, ctx, append([]string{"post", "T", "hello", "--wait"}, client...)...); code != exitOK {
		t.Fatalf("post: exit %d\n%s\n%s", code, stdout, errOut)
	}
	admin := authtest.Connect(t, url, seedOf(t, filepath.Join(auth, "admin.nk")))
	adminJS, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	before := streamState(t, adminJS)

	nc := authtest.Connect(t, url, seedOf(t, filepath.Join(auth, "client.nk")))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	claim := events.Claim{Thread: "T", Holder: "attacker/1", Seq: 2}
	publish := func(subject string, ev *eventspb.Event) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			m := &nats.Msg{Subject: subject, Data: []byte(`{"holder":"attacker","expires":"2100-01-01T00:00:00Z"}`), Header: nats.Header{}}
			if ev != nil {
				data, h, err := events.Encode(ev)
				if err != nil {
					return err
				}
				m.Data = data
				for k, v := range h {
					m.Header[k] = v
				}
			}
			_, err := js.PublishMsg(ctx, m)
			return err
		}
	}
	now := time.Now()
	// 1. run_completed with no check headers, for the active run.
	refused(t, nc, "threads.T.run", publish("threads.T.run", events.NewRunCompleted(claim, now, "r1", "forged answer")))
	// 2, 3. run_started with no headers, under the current holder's claim_seq.
	refused(t, nc, "threads.T.run", publish("threads.T.run", events.NewRunStarted(claim, now, "r2", 1, "echo")))
	// 4. a claim marker with a forged holder (then fenced writes under it).
	refused(t, nc, "threads.T.claim", publish("threads.T.claim", &eventspb.Event{Thread: "T", Time: timestamppb.New(now), Holder: claim.Holder,
		Body: &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{Holder: claim.Holder, LeaseRevision: 1}}}))
	// 5. a lease straight into the bucket, expiring in 2100.
	refused(t, nc, "$KV.claims.T", publish("$KV.claims.T", nil))
	// 6. nats stream edit ARTIFACTR --max-msgs-per-subject 1.
	refused(t, nc, "$JS.API.STREAM.UPDATE.ARTIFACTR", func(ctx context.Context) error {
		cfg := before.cfg
		cfg.MaxMsgsPerSubject = 1
		_, err := js.UpdateStream(ctx, cfg)
		return err
	})
	// 7. nats stream rm ARTIFACTR -f.
	refused(t, nc, "$JS.API.STREAM.DELETE.ARTIFACTR", func(ctx context.Context) error { return js.DeleteStream(ctx, "ARTIFACTR") })
	refused(t, nc, "$JS.API.STREAM.PURGE.ARTIFACTR", func(ctx context.Context) error {
		st, err := js.Stream(ctx, "ARTIFACTR")
		if err != nil {
			return err
		}
		return st.Purge(ctx)
	})

	after := streamState(t, adminJS)
	if after.msgs != before.msgs || after.cfg.MaxMsgsPerSubject != before.cfg.MaxMsgsPerSubject {
		t.Errorf("the stream changed: %d messages, max per subject %d; before %d, %d",
			after.msgs, after.cfg.MaxMsgsPerSubject, before.msgs, before.cfg.MaxMsgsPerSubject)
	}
	// The runtime goes on: the next post gets its run, and the log is clean.
	if code, stdout, errOut := runCLI(t, ctx, append([]string{"post", "T", "again", "--wait"}, client...)...); code != exitOK || !strings.Contains(stdout, "echo: again") {
		t.Errorf("post after the forgeries: exit %d\n%s\n%s", code, stdout, errOut)
	}
	auditor := []string{"--nats", url, "--nkey", filepath.Join(auth, "auditor.nk")}
	if code, stdout, _ := runCLI(t, ctx, append([]string{"audit"}, auditor...)...); code != exitOK {
		t.Errorf("audit: exit %d\n%s", code, stdout)
	}
}

type streamSnap struct {
	cfg  jetstream.StreamConfig
	msgs uint64
}

func streamState(t *testing.T, js jetstream.JetStream) streamSnap {
	t.Helper()
	st, err := js.Stream(t.Context(), natsstore.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	info := st.CachedInfo()
	return streamSnap{cfg: info.Config, msgs: info.State.Msgs}
}

var tlsListenRE = regexp.MustCompile(`NATS listening on ((?:nats|tls)://[^,\s]+)`)

// startServeArgs runs serve until stop is called and returns its output once
// it is ready.
func startServeArgs(t *testing.T, args ...string) (url string, out *testkit.SyncBuffer, stop func()) {
	t.Helper()
	t.Setenv(envNATS, "")
	t.Setenv(envNKey, "")
	ctx, cancel := context.WithCancel(context.Background())
	out = &testkit.SyncBuffer{}
	var errOut testkit.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--no-sync", "--log-level", "warn"}, args...), out, &errOut)
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case code := <-done:
			if code != exitOK {
				t.Errorf("serve exit %d; stderr:\n%s", code, errOut.String())
			}
		case <-time.After(20 * time.Second):
			t.Errorf("serve did not stop; stdout:\n%s", out.String())
		}
		// The runner's role must let it do all it does. (The server's own
		// log also names refusals of the tests' forgeries; serve's store
		// logs only its own.)
		if e := errOut.String(); strings.Contains(e, "the NATS server refused a request") {
			t.Errorf("serve was refused a request:\n%s", e)
		}
	}
	t.Cleanup(stop)
	testkit.CheckFor(t, 15*time.Second, func() error {
		select {
		case code := <-done:
			t.Fatalf("serve exited %d; stderr:\n%s", code, errOut.String())
		default:
		}
		s := out.String()
		if !strings.Contains(s, " ready on stream ") {
			return fmt.Errorf("serve not ready:\n%s", s)
		}
		if m := tlsListenRE.FindStringSubmatch(s); m != nil {
			url = m[1] // "" with --nats: nothing embedded
		}
		return nil
	})
	return url, out, stop
}

// A later serve --auth on the same data directory reuses the seeds: the
// client's key still works.
func TestRun_serveAuth_restartReusesKeys(t *testing.T) {
	data := t.TempDir()
	base := []string{"--auth", "--data", data, "--listen", "127.0.0.1:0"}
	url, _, stop := startServeArgs(t, base...)
	client := filepath.Join(data, "auth", "client.nk")
	seed, err := os.ReadFile(client)
	if err != nil {
		t.Fatal(err)
	}
	if code, stdout, errOut := runCLI(t, t.Context(), "post", "t1", "one", "--nats", url, "--nkey", client); code != exitOK {
		t.Fatalf("post: exit %d\n%s\n%s", code, stdout, errOut)
	}
	stop()
	url, _, _ = startServeArgs(t, base...)
	again, err := os.ReadFile(client)
	if err != nil || string(again) != string(seed) {
		t.Fatalf("client seed changed across restarts (%v)", err)
	}
	code, stdout, errOut := runCLI(t, t.Context(), "post", "t1", "two", "--wait", "--nats", url, "--nkey", client)
	if code != exitOK || !strings.Contains(stdout, "echo: two") {
		t.Errorf("post after restart: exit %d\n%s\n%s", code, stdout, errOut)
	}
}

// Turning --auth on for a data directory a serve without it used keeps
// the history: the users live in the account the stream was made in.
func TestRun_serveAuthKeepsEarlierData(t *testing.T) {
	data := t.TempDir()
	url, _, stop := startServeArgs(t, "--data", data, "--listen", "127.0.0.1:0")
	if code, stdout, errOut := runCLI(t, t.Context(), "post", "t1", "before auth", "--wait", "--nats", url); code != exitOK {
		t.Fatalf("post: exit %d\n%s\n%s", code, stdout, errOut)
	}
	stop()
	url, _, _ = startServeArgs(t, "--data", data, "--listen", "127.0.0.1:0", "--auth")
	code, stdout, errOut := runCLI(t, t.Context(), "show", "t1", "--nats", url, "--nkey", filepath.Join(data, "auth", "client.nk"))
	if code != exitOK || !strings.Contains(stdout, "before auth") {
		t.Errorf("show after turning auth on: exit %d\n%s\n%s", code, stdout, errOut)
	}
}

// Listening beyond loopback turns auth on unless --auth=false is given.
func TestRun_serveNonLoopbackAuthByDefault(t *testing.T) {
	data := t.TempDir()
	url, out, _ := startServeArgs(t, "--data", data, "--listen", "0.0.0.0:0")
	if !strings.Contains(out.String(), "auth on") {
		t.Errorf("serve on 0.0.0.0 did not turn auth on:\n%s", out.String())
	}
	_, port, err := net.SplitHostPort(strings.TrimPrefix(url, "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	local := "nats://127.0.0.1:" + port
	authtest.CheckNoAnonymous(t, local)
	if code, stdout, errOut := runCLI(t, t.Context(), "threads", "--nats", local, "--nkey", filepath.Join(data, "auth", "client.nk")); code != exitOK {
		t.Errorf("threads as client: exit %d\n%s\n%s", code, stdout, errOut)
	}
}

// serve --tls-cert/--tls-key/--tls-ca serves TLS with client certificates;
// clients pass the same flags.
func TestRun_serveTLS(t *testing.T) {
	f := authtest.WriteTLS(t)
	url, out, _ := startServeArgs(t, "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--auth",
		"--tls-cert", f.ServerCert, "--tls-key", f.ServerKey, "--tls-ca", f.CA)
	if !strings.HasPrefix(url, "tls://") || !strings.Contains(out.String(), "TLS on") {
		t.Fatalf("serve with TLS: url %s\n%s", url, out.String())
	}
	data := strings.TrimSuffix(strings.Split(strings.Split(out.String(), "--nkey ")[1], "\n")[0], "client.nk")
	client := []string{"--nats", url, "--nkey", filepath.Join(data, "client.nk")}
	code, stdout, errOut := runCLI(t, t.Context(), append([]string{"post", "t1", "hi", "--wait",
		"--tls-ca", f.CA, "--tls-cert", f.ClientCert, "--tls-key", f.ClientKey}, client...)...)
	if code != exitOK || !strings.Contains(stdout, "echo: hi") {
		t.Errorf("post over TLS: exit %d\n%s\n%s", code, stdout, errOut)
	}
	code, _, errOut = runCLI(t, t.Context(), append([]string{"threads", "--timeout", "2s"}, client...)...)
	if code != exitFail || !strings.Contains(errOut, "hint: --tls-ca") {
		t.Errorf("threads without trusting the CA: exit %d, stderr:\n%s", code, errOut)
	}
	code, _, errOut = runCLI(t, t.Context(), append([]string{"threads", "--tls-ca", f.CA, "--timeout", "2s"}, client...)...)
	if code != exitFail {
		t.Errorf("threads without a client certificate: exit %d, stderr:\n%s", code, errOut)
	}
}

func TestRun_securityUsageErrors(t *testing.T) {
	t.Setenv(envNATS, "")
	seed := filepath.Join(t.TempDir(), "x.nk")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"threads", "--nkey", seed, "--creds", seed}, "give one"},
		{[]string{"threads", "--tls-cert", seed}, "--tls-cert and --tls-key"},
		{[]string{"threads", "--nkey", seed}, "--nkey"},
		{[]string{"serve", "--auth", "--nats", "nats://127.0.0.1:1"}, "with --nats, log in with --nkey"},
		{[]string{"serve", "--agent", "exec", "--agent-env", "ARTIFACTR_NATS", "--", "true"}, "agents never get"},
		{[]string{"serve", "--agent", "exec", "--agent-env", "NATS_CREDS", "--", "true"}, "agents never get"},
		{[]string{"serve", "--agent", "exec", "--agent-env", "=x", "--", "true"}, "want KEY or KEY=VALUE"},
	}
	for _, tc := range cases {
		code, _, stderr := runCLI(t, t.Context(), tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant exit %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}

// The external-cluster flow of examples/nats: on a server with the roles,
// a runner may not create the stream, init as admin does, then a runner
// logged in with its own key serves, and clients post.
func TestRun_initAndExternalRunner(t *testing.T) {
	dir := t.TempDir()
	keys, err := natsauth.LoadOrCreate(dir, natsauth.Roles...)
	if err != nil {
		t.Fatal(err)
	}
	users := map[natsauth.Role]string{}
	for _, k := range keys {
		users[k.Role] = k.Public
	}
	n := natsauth.DefaultNames()
	srv, err := natsembed.Start(natsembed.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", NoSync: true,
		AuthConf: natsauth.PermissionsConf(n) + natsauth.AccountConf(n, users)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	url := srv.ClientURL()
	nkey := func(r natsauth.Role) []string {
		return []string{"--nats", url, "--nkey", filepath.Join(dir, natsauth.SeedFile(r)), "--timeout", "2s"}
	}
	ctx := t.Context()
	code, _, errOut := runCLI(t, ctx, append([]string{"init"}, nkey(natsauth.Runner)...)...)
	if code != exitFail || !strings.Contains(errOut, "permission denied") || !strings.Contains(errOut, "admin") {
		t.Errorf("init as runner: exit %d, stderr:\n%s", code, errOut)
	}
	for range 2 { // init twice: the second changes nothing
		if code, stdout, errOut := runCLI(t, ctx, append([]string{"init"}, nkey(natsauth.Admin)...)...); code != exitOK {
			t.Fatalf("init as admin: exit %d\n%s\n%s", code, stdout, errOut)
		}
	}
	startServeArgs(t, append([]string{"--claim-ttl", "2s"}, nkey(natsauth.Runner)...)...)
	code, stdout, errOut := runCLI(t, ctx, append([]string{"post", "t1", "hello", "--wait"}, nkey(natsauth.Client)...)...)
	if code != exitOK || !strings.Contains(stdout, "echo: hello") {
		t.Errorf("post as client to an external runner: exit %d\n%s\n%s", code, stdout, errOut)
	}
	if code, stdout, _ := runCLI(t, ctx, append([]string{"audit"}, nkey(natsauth.Auditor)...)...); code != exitOK {
		t.Errorf("audit: exit %d\n%s", code, stdout)
	}
}

// Issue 10's first forgery on a server without --auth (or by a writer
// with runner credentials): a run_completed for the active run, published
// to threads.T.run with no check headers, is stored; the audit now flags
// it (RunChain), where it used to report 0 violations.
func TestRun_auditFlagsUncheckedRunCompleted(t *testing.T) {
	url, _ := serveInProcess(t, "--echo-delay", "1m", "--shutdown-grace", "100ms")
	ctx := t.Context()
	if code, stdout, errOut := runCLI(t, ctx, "post", "T", "hello", "--nats", url); code != exitOK {
		t.Fatalf("post: exit %d\n%s\n%s", code, stdout, errOut)
	}
	var v threadView
	testkit.CheckFor(t, 10*time.Second, func() error {
		_, out, _ := runCLI(t, ctx, "show", "T", "--json", "--nats", url)
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			return err
		}
		if v.ActiveRun == nil || len(v.Runs) == 0 {
			return fmt.Errorf("no active run yet:\n%s", out)
		}
		return nil
	})
	run := v.Runs[len(v.Runs)-1]
	claim := events.Claim{Thread: "T", Holder: run.Holder, Seq: run.ClaimSeq}
	data, h, err := events.Encode(events.NewRunCompleted(claim, time.Now(), run.ID, "the attacker's answer"))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "threads.T.run", Data: data, Header: nats.Header(h)}); err != nil {
		t.Fatalf("forged publish (no auth, so stored): %v", err)
	}
	code, out, _ := runCLI(t, ctx, "audit", "--nats", url)
	if code != exitFail || !strings.Contains(out, "RunChain thread T") || !strings.Contains(out, "no check") {
		t.Errorf("audit of a forged unchecked run_completed: exit %d\n%s", code, out)
	}
}
