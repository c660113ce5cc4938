package runner_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
)

// Issue 10, item 5: a run_completed published straight to threads.T.run,
// with no check headers, for the active run. Before, the runner took it
// for the run's end: the next message's run started while the real agent
// still ran. Now the runner logs it and does not act on it: the real run
// goes on, its own end is written, and only then does the next run start.
func TestRunner_forgedRunCompletedIgnored(t *testing.T) {
	srv := natsembed.RunForTest(t)
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
