package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed"
)

// specServer starts an embedded server with a store on it.
func specServer(t *testing.T) (string, *natsstore.Store) {
	t.Helper()
	t.Setenv(envNATS, "")
	srv, err := natsembed.Start(natsembed.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	store, err := natsstore.New(t.Context(), natsstore.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return srv.ClientURL(), store
}

func mustAppend(t *testing.T, s events.Store, ev *eventspb.Event, chk events.Check) {
	t.Helper()
	if _, err := s.Append(t.Context(), ev, chk); err != nil {
		t.Fatalf("append %s: %v", events.TypeOf(ev), err)
	}
}

// TestRun_auditSpec: `audit --spec` passes a log the code wrote, and flags
// ADR-0069's stale run_started, written without the fence, naming its seq
// and the actions the spec allowed there.
func TestRun_auditSpec(t *testing.T) {
	url, store := specServer(t)
	ctx := t.Context()
	now := time.Unix(0, 0)
	post := func(thread, id string) uint64 {
		ack, err := store.Post(ctx, thread, &eventspb.MessagePosted{MessageId: id, Text: id})
		if err != nil {
			t.Fatal(err)
		}
		return ack.Seq
	}
	claim := func(thread, holder string) events.Claim {
		c, _, err := events.AcquireClaim(ctx, store, thread, holder, time.Minute, now)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// t1: a claim, a run with a request and its answer, a release.
	m1 := post("t1", "m1")
	c := claim("t1", "r1/a")
	mustAppend(t, store, events.NewRunStarted(c, now, "run-1", m1, "echo"), events.Fenced(c))
	last, _ := store.LastSeq(ctx, "t1", events.KindRun)
	mustAppend(t, store, events.NewRequestOpened(c, now, "run-1", "q1", "?"), events.ExpectLast(last))
	m2 := post("t1", "m2")
	mustAppend(t, store, events.NewAnswerGiven(c, now, "run-1", "q1", m2), events.Fenced(c))
	last, _ = store.LastSeq(ctx, "t1", events.KindRun)
	mustAppend(t, store, events.NewRunCompleted(c, now, "run-1", "ok"), events.ExpectLast(last))
	if err := events.ReleaseClaim(ctx, store, c, "idle", now); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, ctx, "audit", "--spec", "--nats", url)
	if code != exitOK || !strings.Contains(out, "spec OK:") {
		t.Fatalf("audit --spec on a good log: exit %d\n%s%s", code, out, errOut)
	}

	// t2: A claims, B takes the thread over (A's lease released here, as
	// a lapse would), and A's run_started lands unfenced.
	m := post("t2", "m1")
	a := claim("t2", "r1/a")
	if err := store.ReleaseLease(ctx, a.Lease); err != nil {
		t.Fatal(err)
	}
	claim("t2", "r2/b")
	stale := events.NewRunStarted(a, now, "run-a", m, "echo")
	mustAppend(t, eventstest.Unfenced(store), stale, events.Fenced(a))
	staleSeq, _ := store.LastSeq(ctx, "t2", events.KindRun)

	code, out, _ = runCLI(t, ctx, "audit", "--spec", "--nats", url)
	if code != exitFail || !strings.Contains(out, "spec: 1 of 2 threads do not conform") ||
		!strings.Contains(out, "thread t2, seq "+itoa(staleSeq)) || !strings.Contains(out, "RunStart(r2/b)") {
		t.Errorf("audit --spec on a stale start: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, ctx, "audit", "--spec", "--json", "--thread", "t2", "--nats", url)
	var rep struct {
		Spec struct {
			Nonconforming []struct {
				Seq    uint64 `json:"seq"`
				Action string `json:"action"`
			} `json:"nonconforming"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(out), &rep); code != exitFail || err != nil ||
		len(rep.Spec.Nonconforming) != 1 || rep.Spec.Nonconforming[0].Seq != staleSeq || rep.Spec.Nonconforming[0].Action != "RunStart(r1/a)" {
		t.Errorf("audit --spec --json: exit %d, err %v\n%s", code, err, out)
	}
	code, _, errOut = runCLI(t, context.Background(), "audit", "--spec", "--from", "3", "--nats", url)
	if code != exitUsage || !strings.Contains(errOut, "--from") {
		t.Errorf("audit --spec --from 3: exit %d, stderr %q", code, errOut)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
