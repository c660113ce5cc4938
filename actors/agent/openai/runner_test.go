package openai_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/agent/openai"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/audit"
)

// Through the real runner on the embedded NATS server: a streamed reply
// lands as run_output events in the order streamed, then run_completed
// with an empty output (the text is not recorded twice); an ask_user call
// is a request_opened that the thread's next post answers, and the model
// gets the answer. The audit finds the log clean.
func TestAgent_throughRunner(t *testing.T) {
	words := []string{"one ", "two ", "three ", "four ", "five."}
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		s := startStream(w)
		switch n {
		case 0:
			for _, w := range words {
				s.content(w)
			}
			s.finish("stop")
		case 1:
			s.toolDelta(0, "c1", "ask_user", `{"question":`)
			s.toolDelta(0, "", "", `"Which colour?"}`)
			s.finish("tool_calls")
		default:
			s.content("Blue it is.")
			s.finish("stop")
		}
	})
	// Each word its own event: FlushBytes below a word's size, no timer.
	a := newAgent(t, f, openai.Config{FlushInterval: time.Hour, FlushBytes: 1})

	store := startRunner(t, a)

	post(t, store, "chat", "count to five")
	v := waitThread(t, store, "chat", "the first run's end", func(v *projections.Thread) bool {
		return len(v.Runs) == 1 && v.ActiveRun == nil
	})
	run := v.Runs[0]
	if run.Status != projections.RunCompleted || run.Output != "" || run.Agent != "openai:fake-model" {
		t.Fatalf("run = %+v; want completed by openai:fake-model with an empty output", run)
	}
	if !slices.Equal(run.Outputs, words) {
		t.Fatalf("outputs = %q, want %q", run.Outputs, words)
	}
	envs, err := store.Load(t.Context(), "chat", 1)
	if err != nil {
		t.Fatal(err)
	}
	var types []events.Type
	for _, e := range envs {
		if e.Kind == events.KindRun {
			types = append(types, e.Type)
		}
	}
	want := []events.Type{events.TypeRunStarted, events.TypeRunOutput, events.TypeRunOutput, events.TypeRunOutput,
		events.TypeRunOutput, events.TypeRunOutput, events.TypeRunCompleted}
	if !slices.Equal(types, want) {
		t.Fatalf("run subject events = %v, want %v", types, want)
	}

	post(t, store, "chat", "pick a colour for me")
	v = waitThread(t, store, "chat", "the question", func(v *projections.Thread) bool {
		return v.ActiveRun != nil && len(v.ActiveRun.Requests) == 1
	})
	if q := v.Requests[v.ActiveRun.Requests[0]]; q.Question != "Which colour?" {
		t.Fatalf("question = %q", q.Question)
	}
	post(t, store, "chat", "blue")
	v = waitThread(t, store, "chat", "the second run's end", func(v *projections.Thread) bool {
		return len(v.Runs) == 2 && v.ActiveRun == nil
	})
	if run := v.Runs[1]; run.Status != projections.RunCompleted || strings.Join(run.Outputs, "") != "Blue it is." {
		t.Fatalf("second run = %+v", run)
	}
	reqs := f.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	// The third request carries the conversation so far (the first run's
	// reply as the assistant's), the tool call and its answer.
	var got []string
	for _, m := range reqs[2].Body.Messages {
		got = append(got, m.Role+":"+deref(m.Content))
	}
	if want := []string{"user:count to five", "assistant:one two three four five.", "user:pick a colour for me", "assistant:", "tool:blue"}; !slices.Equal(got, want) {
		t.Errorf("third request's messages = %q, want %q", got, want)
	}

	auditClean(t, store, "chat")
}

// Through the real runner, a message posted while the model streams is
// given to the run as steering (steering_given) when the model's reply
// ends, and the model is asked again with it; the run completes with both
// replies.
func TestAgent_throughRunnerSteered(t *testing.T) {
	release := make(chan struct{})
	f := newFakeServer(t,
		func(w http.ResponseWriter, r *http.Request, n int) {
			s := startStream(w)
			s.content("A long answer")
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			s.finish("stop")
		},
		streamText("; in short: yes."),
	)
	spy := &steerSpy{Agent: newAgent(t, f, openai.Config{Steer: true, FlushInterval: time.Millisecond}), posted: make(chan struct{})}
	store := startRunner(t, spy)
	post(t, store, "st", "explain")
	waitThread(t, store, "st", "the first output", func(v *projections.Thread) bool {
		return v.ActiveRun != nil && len(v.ActiveRun.Outputs) == 1
	})
	post(t, store, "st", "shorter please")
	close(spy.posted)
	close(release)
	v := waitThread(t, store, "st", "the run's end", func(v *projections.Thread) bool {
		return len(v.Runs) == 1 && v.ActiveRun == nil
	})
	if run := v.Runs[0]; run.Status != projections.RunCompleted || strings.Join(run.Outputs, "") != "A long answer; in short: yes." {
		t.Fatalf("run = %+v", run)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if got, want := roles(reqs[1]), []string{"user:explain", "assistant:A long answer", "user:shorter please"}; !slices.Equal(got, want) {
		t.Errorf("second request = %q, want %q", got, want)
	}
	auditClean(t, store, "st")
}

// startRunner starts a runner with agent a on a fresh embedded NATS server
// and returns its store; both stop when the test ends.
func startRunner(t *testing.T, a agent.Agent) *natsstore.Store {
	t.Helper()
	srv := natsembedtest.RunForTest(t)
	store, err := natsstore.New(t.Context(), natsstore.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	r, err := runner.New(runner.Config{
		Store: store, Agent: a, ID: "openai-test", ClaimTTL: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("runner stop: %v", err)
		}
	})
	return store
}

// auditClean replays thread through the audit and fails t on a violation.
func auditClean(t *testing.T, s events.Store, thread string) {
	t.Helper()
	envs, err := s.Load(t.Context(), thread, 1)
	if err != nil {
		t.Fatal(err)
	}
	au := audit.New()
	for _, e := range envs {
		au.Add(e)
	}
	if rep := au.Report(); !rep.OK() {
		t.Fatalf("audit found violations: %+v", rep.Violations)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func post(t *testing.T, s events.Store, thread, text string) {
	t.Helper()
	if _, err := s.Post(t.Context(), thread, &eventspb.MessagePosted{Text: text, Author: "user"}); err != nil {
		t.Fatal(err)
	}
}

// waitThread polls the thread's fold until cond holds, and returns it.
func waitThread(t *testing.T, s events.Store, thread, what string, cond func(*projections.Thread) bool) *projections.Thread {
	t.Helper()
	var v *projections.Thread
	testkit.CheckFor(t, testTimeout, func() error {
		envs, err := s.Load(t.Context(), thread, 1)
		if err != nil {
			return err
		}
		v = projections.Fold(thread, envs)
		if !cond(v) {
			return fmt.Errorf("waiting for %s: %d runs, active %v", what, len(v.Runs), v.ActiveRun != nil)
		}
		return nil
	})
	return v
}

// steerSpy is an agent whose Steer, once the test posted a message (posted
// closed), asks again until the runner has seen that message and gives it:
// the post is stored before the run's checkpoint, but the runner's follow
// may bring it a moment later.
type steerSpy struct {
	*openai.Agent
	posted chan struct{}
}

func (s *steerSpy) Run(ctx context.Context, t agent.Turn) (string, error) {
	return s.Agent.Run(ctx, &spyTurn{Turn: t, s: s})
}

type spyTurn struct {
	agent.Turn
	s   *steerSpy
	got bool
}

func (t *spyTurn) Steer(ctx context.Context) ([]agent.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, testTimeout)
	defer cancel()
	for {
		msgs, err := t.Turn.Steer(ctx)
		if err != nil || len(msgs) > 0 || t.got {
			t.got = t.got || len(msgs) > 0
			return msgs, err
		}
		select {
		case <-t.s.posted:
		default:
			return nil, nil // nothing posted yet: nothing to wait for
		}
	}
}
