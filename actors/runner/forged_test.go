package runner_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/audit"
)

// Issue 10, item 5: a run_completed published straight to threads.T.run,
// with no check headers, for the active run. Before, the runner took it
// for the run's end: the next message's run started while the real agent
// still ran. Now the runner logs it and does not act on it: the real run
// goes on, its own end is written, and only then does the next run start.
func TestRunner_forgedRunCompletedIgnored(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s, err := natsstore.New(t.Context(), natsstore.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	logs := new(testkit.SyncBuffer)
	r := startRunner(t, runner.Config{Store: s, Agent: agent.Echo{Delay: 2 * time.Second}, ClaimTTL: 3 * time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	th := "forged"
	post(t, s, th, "first")
	var active *projections.Run
	testkit.CheckFor(t, 20*time.Second, func() error {
		if active = fold(t, s, th).ActiveRun; active == nil {
			return fmt.Errorf("no active run yet")
		}
		return nil
	})
	post(t, s, th, "second")

	// The forger: anyone with the URL, no headers, the holder's claim.
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c := events.Claim{Thread: th, Seq: active.ClaimSeq, Holder: active.Holder}
	data, h, err := events.Encode(events.NewRunCompleted(c, time.Now(), active.ID, "forged text"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(t.Context(), &nats.Msg{Subject: "threads." + th + ".run", Header: nats.Header(h), Data: data}); err != nil {
		t.Fatal(err)
	}

	testkit.CheckFor(t, 30*time.Second, func() error {
		var started, completed int
		for _, e := range load(t, s, th) {
			switch e.Type {
			case events.TypeRunStarted:
				started++
			case events.TypeRunCompleted:
				completed++
			}
		}
		if started < 2 || completed < 3 {
			return fmt.Errorf("%d run_started, %d run_completed (the forgery included)", started, completed)
		}
		return nil
	})
	// In the log: the forgery, then the real run's own end, and only then
	// the second run's start.
	var forged, realEnd, second uint64
	for _, e := range load(t, s, th) {
		switch {
		case e.Type == events.TypeRunCompleted && e.MsgID == "":
			forged = e.Seq
		case e.Type == events.TypeRunCompleted && e.Event.GetRunCompleted().GetRunId() == active.ID && e.MsgID != "":
			realEnd = e.Seq
		case e.Type == events.TypeRunStarted && e.Event.GetRunStarted().GetRunId() != active.ID && second == 0:
			second = e.Seq
		}
	}
	if forged == 0 || realEnd == 0 || second == 0 || !(forged < realEnd && realEnd < second) {
		t.Fatalf("forged end at %d, the real end at %d, the second start at %d: want them in that order", forged, realEnd, second)
	}
	if !strings.Contains(logs.String(), "not written by this holder") {
		t.Errorf("the runner logged no warning about the forgery:\n%s", logs.String())
	}
}

func load(t *testing.T, s events.Store, th string) []events.Envelope {
	t.Helper()
	envs, err := s.Load(context.Background(), th, 1)
	if err != nil {
		t.Fatal(err)
	}
	return envs
}

// forger writes with runner credentials: any event, with valid checks.
type forger struct {
	t *testing.T
	s events.Store
	n int
}

func (f *forger) append(ev *eventspb.Event, chk events.Check) uint64 {
	f.t.Helper()
	f.n++
	ack, err := f.s.Append(context.Background(), ev, chk, events.WithMsgID(fmt.Sprintf("forger:%s:%d", ev.GetThread(), f.n)))
	if err != nil {
		f.t.Fatalf("forge %s: %v", events.TypeOf(ev), err)
	}
	return ack.Seq
}

// appendLast appends ev with a compare-and-set on the last sequence of
// its thread's kind subject, read anew while the honest runner's own
// writes move that subject on: a forger with valid headers retries too.
func (f *forger) appendLast(ev *eventspb.Event, k events.Kind) uint64 {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.n++
		ack, err := f.s.Append(context.Background(), ev, events.ExpectLast(f.last(ev.GetThread(), k)),
			events.WithMsgID(fmt.Sprintf("forger:%s:%d", ev.GetThread(), f.n)))
		switch {
		case err == nil:
			return ack.Seq
		case errors.Is(err, events.ErrConflict) && time.Now().Before(deadline):
			continue
		}
		f.t.Fatalf("forge %s: %v", events.TypeOf(ev), err)
	}
}

func (f *forger) last(th string, k events.Kind) uint64 {
	f.t.Helper()
	n, err := f.s.LastSeq(context.Background(), th, k)
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// Issue 23, items 1 and 2: the forgeries of a writer with runner
// credentials and valid headers, against an honest runner on a real
// server. The honest runner writes no I1 or I3 violation whatever the
// forger stores, goes on serving the thread, and the plain audit flags
// each forgery.
func TestRunner_forgeriesWithRunnerCredentials(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s, err := natsstore.New(t.Context(), natsstore.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	fs, err := natsstore.New(t.Context(), natsstore.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	r := startRunner(t, runner.Config{Store: s, Agent: agent.Echo{Delay: time.Second}, ClaimTTL: 3 * time.Second})
	t.Cleanup(func() { // before the stores close: cleanups run last first
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	tests := []struct {
		name string
		// forge runs while the holder's run on "one" is active and "two"
		// is pending; active is that run.
		forge func(f *forger, th string, active *projections.Run, two uint64)
		want  string // the check the forgery breaks
		// stalls: the forgery leaves the thread to a forged claim, which no
		// runner serves until its lease is found out (item 3).
		stalls bool
	}{
		{"second run_completed of the active run", func(f *forger, th string, active *projections.Run, two uint64) {
			c := events.Claim{Thread: th, Seq: active.ClaimSeq, Holder: active.Holder}
			f.appendLast(events.NewRunCompleted(c, time.Now(), active.ID, "forged text"), events.KindRun)
		}, audit.CheckRunByHolder, false},
		{"run_completed with no claim marker", func(f *forger, th string, active *projections.Run, two uint64) {
			c := events.Claim{Thread: th, Holder: "forger"}
			f.appendLast(events.NewRunCompleted(c, time.Now(), active.ID, "forged text"), events.KindRun)
		}, audit.CheckRunByHolder, false},
		{"forged claim, then the end of a run that never started", func(f *forger, th string, active *projections.Run, two uint64) {
			c := events.Claim{Thread: th, Holder: "forger"}
			marker := &eventspb.Event{Thread: th, Holder: c.Holder, Body: &eventspb.Event_ThreadClaimed{
				ThreadClaimed: &eventspb.ThreadClaimed{Holder: c.Holder, LeaseRevision: 1, LeaseTtlMs: 3000}}}
			c.Seq = f.appendLast(marker, events.KindClaim)
			f.appendLast(events.NewRunCompleted(c, time.Now(), "ghost", "forged text"), events.KindRun)
		}, audit.CheckRunByHolder, true},
		{"fenced run_started under the holder's claim while a run is active", func(f *forger, th string, active *projections.Run, two uint64) {
			c := events.Claim{Thread: th, Seq: active.ClaimSeq, Holder: active.Holder}
			f.append(events.NewRunStarted(c, time.Now(), "evil", two, "evil"), events.Fenced(c))
		}, audit.CheckI3, false},
		{"answer_given to a request that does not exist", func(f *forger, th string, active *projections.Run, two uint64) {
			c := events.Claim{Thread: th, Seq: active.ClaimSeq, Holder: active.Holder}
			f.append(events.NewAnswerGiven(c, time.Now(), active.ID, "nope", two), events.Fenced(c))
		}, audit.CheckGivenToActive, false},
	}
	for i, tc := range tests {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			th := fmt.Sprintf("forged-%d", i)
			t.Cleanup(func() {
				if t.Failed() { // the thread's log, to tell what the runner did
					for _, e := range load(t, s, th) {
						t.Logf("  %d %s claim=%d holder=%s msgid=%s %v", e.Seq, e.Type, e.Event.GetClaimSeq(), e.Event.GetHolder(), e.MsgID, e.Event.GetBody())
					}
				}
			})
			post(t, s, th, "one")
			var active *projections.Run
			testkit.CheckFor(t, 20*time.Second, func() error {
				if active = fold(t, s, th).ActiveRun; active == nil {
					return fmt.Errorf("no active run yet")
				}
				return nil
			})
			two := post(t, s, th, "two")
			tc.forge(&forger{t: t, s: fs}, th, active, two)
			if !tc.stalls {
				post(t, s, th, "three")
				testkit.CheckFor(t, 30*time.Second, func() error {
					if ok, why := settled(t, s, th)(); !ok {
						return errors.New(why)
					}
					return nil
				})
			}
			envs := load(t, s, th)
			a := audit.New()
			honest := map[uint64]bool{}
			for _, e := range envs {
				a.Add(e)
				honest[e.Seq] = !strings.HasPrefix(e.MsgID, "forger:") && e.Type != events.TypeMessagePosted
			}
			rep := a.Report()
			flagged := false
			for _, v := range rep.Violations {
				if last := v.Seqs[len(v.Seqs)-1]; honest[last] && (v.Check == audit.CheckI1 || v.Check == audit.CheckI3) {
					t.Errorf("the honest runner wrote an %s violation: %+v", v.Check, v)
				}
				flagged = flagged || v.Check == tc.want
			}
			if !flagged {
				t.Errorf("violations %+v: the forgery is not flagged %s", rep.Violations, tc.want)
			}
			// No message is the prompt of two runs.
			prompts := map[uint64]int{}
			for _, e := range envs {
				if rs := e.Event.GetRunStarted(); rs != nil && honest[e.Seq] {
					prompts[rs.GetPromptSeq()]++
				}
			}
			for m, n := range prompts {
				if n > 1 {
					t.Errorf("message %d prompted %d honest runs", m, n)
				}
			}
		})
	}
}

// Issue 23, item 3: a lease written straight to $KV.claims.T, with no
// session and an expiry in 2100, no longer starves the thread: once it is
// older than the store's UnexplainedLeaseTTL, the runner claims the thread,
// runs its post, and logs and counts the taking.
func TestRunner_forgedLeaseReclaimed(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s, err := natsstore.New(t.Context(), natsstore.Config{URL: srv.ClientURL(), UnexplainedLeaseTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	th := "starved"
	data, err := proto.Marshal(&eventspb.Lease{Holder: "forger", ExpiresUnixNano: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), TtlMs: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), "$KV.claims."+th, data); err != nil {
		t.Fatal(err)
	}
	logs := new(testkit.SyncBuffer)
	r := startRunner(t, runner.Config{Store: s, ClaimTTL: time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	post(t, s, th, "hello")
	testkit.CheckFor(t, 30*time.Second, func() error {
		if ok, why := settled(t, s, th)(); !ok {
			return errors.New(why)
		}
		return nil
	})
	if n := r.Stats().LeasesReclaimed; n != 1 {
		t.Errorf("LeasesReclaimed %d, want 1", n)
	}
	if !strings.Contains(logs.String(), "no live session explained") {
		t.Errorf("the taking was not logged:\n%s", logs.String())
	}
}
