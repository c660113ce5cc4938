package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/timestamppb"

	"artifactr/events"
	"artifactr/events/eventspb"
	"artifactr/events/natsstore"
	"artifactr/internal/natsauth"
	"artifactr/internal/natsauth/authtest"
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
	url, out := serveInProcess(t, "--auth", "--data", data, "--claim-ttl", "2s")
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
	for _, args := range [][]string{{"threads"}, {"show", "t1"}, {"projections", "status"}} {
		if code, stdout, errOut := runCLI(t, ctx, append(args, client...)...); code != exitOK {
			t.Errorf("%v as client: exit %d\n%s\n%s", args, code, stdout, errOut)
		}
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
	url, _ := serveInProcess(t, "--auth", "--data", data, "--claim-ttl", "2s")
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
