package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/internal/sys"
)

// Agent is an [agent.Agent] backed by an OpenAI-compatible chat-completions
// server. Make one with [New]; it is safe for concurrent runs.
type Agent struct {
	cfg      Config
	endpoint string

	// Seams for tests: the clock that reads Retry-After dates, and the
	// wait between retries.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) bool
}

// New checks cfg, fills in its defaults and returns the agent.
func New(cfg Config) (*Agent, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Agent{
		cfg:      cfg,
		endpoint: cfg.BaseURL + "/chat/completions",
		now:      time.Now,
		sleep:    sys.Sleep,
	}, nil
}

// Name returns "openai:" and the model, as run_started records it.
func (a *Agent) Name() string { return "openai:" + a.cfg.Model }

// Steerable reports [Config.Steer]. Without it, messages posted during a
// run wait for the next run, which sees them in its history.
func (a *Agent) Steerable() bool { return a.cfg.Steer }

// Run sends the thread's conversation to the model and streams its reply
// into run_output events. A call of the ask_user tool becomes t.Ask, and
// the answer goes back to the model as the tool's result, until the model
// replies without a tool call. If the agent is steerable, messages posted
// meanwhile are added to the conversation, and the model is asked again
// once its reply ends.
//
// Every word of the reply is recorded once, as run_output, so the returned
// final output is empty: the run's text is its outputs joined with no
// separator.
func (a *Agent) Run(ctx context.Context, t agent.Turn) (string, error) {
	msgs := a.conversation(t)
	em := agent.NewCoalescer(func(ctx context.Context, text string) error {
		if err := t.Emit(ctx, text); err != nil {
			return fmt.Errorf("openai: emit: %w", err)
		}
		return nil
	}, a.cfg.FlushInterval, a.cfg.FlushBytes)
	defer em.Stop()
	st := &steering{t: t, on: a.cfg.Steer}
	if err := st.pull(ctx); err != nil {
		return "", err
	}
	msgs = a.appendThread(msgs, st.take())
	for round := 1; ; round++ {
		if round > a.cfg.MaxToolRounds {
			return "", fmt.Errorf("openai: still going after %d requests in one turn (serve --openai-max-tool-rounds): the model kept calling tools, or was kept steered", a.cfg.MaxToolRounds)
		}
		r, err := a.complete(ctx, msgs, em)
		if err != nil {
			if ctx.Err() == nil {
				// Keep what was streamed before the failure; the run
				// fails anyway.
				_ = em.Flush(ctx)
			}
			return "", err
		}
		// Recorded before any request_opened, in the order it came.
		if err := em.Flush(ctx); err != nil {
			return "", err
		}
		if len(r.calls) == 0 {
			// The checkpoint before the run ends: steering taken here is
			// read by the model on the next round.
			if err := st.pull(ctx); err != nil {
				return "", err
			}
		}
		if len(r.calls) == 0 && len(st.got) == 0 {
			return "", nil
		}
		if len(r.calls) > 0 || r.text.Len() > 0 {
			msgs = append(msgs, assistantMessage(r, round))
		}
		for _, c := range r.calls {
			result, err := a.callTool(ctx, t, c)
			if err != nil {
				return "", err
			}
			msgs = append(msgs, chatMessage{Role: "tool", Content: ptr(result), ToolCallID: c.ID})
		}
		if len(r.calls) > 0 {
			if err := st.pull(ctx); err != nil { // posted while asking
				return "", err
			}
		}
		msgs = a.appendThread(msgs, st.take())
	}
}

// steering collects the messages posted during a run of a steerable agent.
// It is used from the run's goroutine only.
type steering struct {
	t   agent.Turn
	on  bool // the agent is steerable
	got []agent.Message
}

// pull takes the steering posted so far ([agent.Turn.Steer]).
func (s *steering) pull(ctx context.Context) error {
	if !s.on {
		return nil
	}
	msgs, err := s.t.Steer(ctx)
	if err != nil {
		return fmt.Errorf("openai: steer: %w", err)
	}
	s.got = append(s.got, msgs...)
	return nil
}

func (s *steering) take() []agent.Message {
	got := s.got
	s.got = nil
	return got
}

// assistantMessage is the model's reply r as the next request repeats it.
// Calls without an id (some servers send none) get one, as the tool
// results must name them.
func assistantMessage(r *reply, round int) chatMessage {
	m := chatMessage{Role: "assistant", ToolCalls: r.calls}
	if r.text.Len() > 0 {
		m.Content = ptr(r.text.String())
	}
	for i := range r.calls {
		if r.calls[i].ID == "" {
			r.calls[i].ID = fmt.Sprintf("call_%d_%d", round, i)
		}
	}
	return m
}

// callTool runs one tool call and returns its result for the model. A call
// the model got wrong is answered with an error the model can read and
// correct; only a failed Ask ends the run.
func (a *Agent) callTool(ctx context.Context, t agent.Turn, c toolCall) (string, error) {
	if c.Function.Name != askUserName {
		return fmt.Sprintf("error: there is no tool %q; the only tool is %s", c.Function.Name, askUserName), nil
	}
	var args struct {
		Question *string `json:"question"`
	}
	err := json.Unmarshal([]byte(c.Function.Arguments), &args)
	if err != nil || args.Question == nil || strings.TrimSpace(*args.Question) == "" {
		return fmt.Sprintf(`error: %s takes {"question": "a non-empty string"}; got %s`, askUserName, quoteCut(c.Function.Arguments, 200)), nil
	}
	m, err := t.Ask(ctx, strings.TrimSpace(*args.Question))
	if err != nil {
		return "", fmt.Errorf("openai: ask: %w", err)
	}
	return m.Text, nil
}

// nameRE is what OpenAI accepts as a message's name.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// conversation is the system prompt, then the thread's messages before the
// prompt, then the prompt. Messages by AssistantAuthor are the model's own;
// the others are the user's, named by their author when OpenAI would
// accept it as a name, so the model can tell several people apart.
func (a *Agent) conversation(t agent.Turn) []chatMessage {
	var msgs []chatMessage
	if a.cfg.System != "" {
		msgs = append(msgs, chatMessage{Role: "system", Content: ptr(a.cfg.System)})
	}
	if ct, ok := t.(agent.Conversational); ok {
		msgs = a.appendThread(msgs, ct.Conversation())
	} else {
		msgs = a.appendThread(msgs, t.History())
	}
	return a.appendThread(msgs, []agent.Message{t.Prompt()})
}

// appendThread appends thread messages to msgs: role "assistant" for
// AssistantAuthor's, "user" for the others'.
func (a *Agent) appendThread(msgs []chatMessage, ms []agent.Message) []chatMessage {
	for _, m := range ms {
		if m.Text == "" {
			continue
		}
		if m.Run != "" || m.Author == a.cfg.AssistantAuthor {
			msgs = append(msgs, chatMessage{Role: "assistant", Content: ptr(m.Text)})
			continue
		}
		cm := chatMessage{Role: "user", Content: ptr(m.Text)}
		if nameRE.MatchString(m.Author) {
			cm.Name = m.Author
		}
		msgs = append(msgs, cm)
	}
	return msgs
}

// complete makes one streamed request and returns the reply, its text
// already handed to em.
func (a *Agent) complete(ctx context.Context, msgs []chatMessage, em *agent.Coalescer) (*reply, error) {
	body, err := json.Marshal(a.request(msgs))
	if err != nil {
		return nil, fmt.Errorf("openai: encode request: %w", err)
	}
	req, err := a.open(ctx, body)
	if err != nil {
		return nil, err
	}
	ch := make(chan streamMsg)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { readStream(req.resp.Body, ch, stop) })
	defer func() {
		// Closing the body ends a read in progress, so the reader is
		// gone before the request's timers are released: it re-arms one.
		close(stop)
		req.resp.Body.Close()
		wg.Wait()
		req.close()
	}()
	r := &reply{}
	for {
		select {
		case m := <-ch:
			if m.last {
				if m.err != nil {
					return nil, a.streamError(ctx, req, m.err)
				}
				if m.noDone {
					a.cfg.Logger.Warn("openai: the stream ended after its finish_reason without data: [DONE]; taking the reply as whole",
						"endpoint", a.endpoint)
				}
				return r, nil
			}
			if err := a.apply(ctx, r, m.c, em); err != nil {
				return nil, err
			}
		case <-em.Due():
			if err := em.Flush(ctx); err != nil {
				return nil, err
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("openai: %w", context.Cause(ctx))
		}
	}
}

func (a *Agent) request(msgs []chatMessage) chatRequest {
	req := chatRequest{Model: a.cfg.Model, Messages: msgs, Stream: true}
	if !a.cfg.NoTools {
		req.Tools = []tool{askUserTool}
	}
	return req
}

// apply folds one chunk into r, streaming its text. Only the first choice
// counts: the agent asks for one.
func (a *Agent) apply(ctx context.Context, r *reply, c chunk, em *agent.Coalescer) error {
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		if s := ch.Delta.Content; s != nil && *s != "" {
			r.text.WriteString(*s)
			if err := em.Add(ctx, *s); err != nil {
				return err
			}
		}
		for _, d := range ch.Delta.ToolCalls {
			if err := r.addToolDelta(d); err != nil {
				return fmt.Errorf("openai: %s: %w", a.endpoint, err)
			}
		}
	}
	return nil
}

// streamError explains why a stream ended without [DONE]: its request's
// context may have ended first, which the read error alone hides.
func (a *Agent) streamError(ctx context.Context, req *request, err error) error {
	if req.ctx.Err() != nil {
		return a.cause(ctx, req.ctx, err)
	}
	return fmt.Errorf("openai: %s: %w", a.endpoint, err)
}
