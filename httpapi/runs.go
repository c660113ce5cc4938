package httpapi

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
)

// runCreate is the body of the run routes, with every field the SDK sends.
type runCreate struct {
	AssistantID       string          `json:"assistant_id"`
	Input             json.RawMessage `json:"input"`
	Command           *command        `json:"command"`
	Config            json.RawMessage `json:"config"`
	Context           json.RawMessage `json:"context"`
	Metadata          json.RawMessage `json:"metadata"`
	StreamMode        json.RawMessage `json:"stream_mode"`
	StreamSubgraphs   *bool           `json:"stream_subgraphs"`
	StreamResumable   *bool           `json:"stream_resumable"`
	FeedbackKeys      json.RawMessage `json:"feedback_keys"`
	InterruptBefore   json.RawMessage `json:"interrupt_before"`
	InterruptAfter    json.RawMessage `json:"interrupt_after"`
	Checkpoint        *checkpointRef  `json:"checkpoint"`
	CheckpointID      string          `json:"checkpoint_id"`
	Webhook           string          `json:"webhook"`
	StrictResume      *bool           `json:"strict_resume"`
	MultitaskStrategy string          `json:"multitask_strategy"`
	OnCompletion      string          `json:"on_completion"`
	OnDisconnect      string          `json:"on_disconnect"`
	AfterSeconds      *float64        `json:"after_seconds"`
	IfNotExists       string          `json:"if_not_exists"`
	CheckpointDuring  *bool           `json:"checkpoint_during"`
	Durability        string          `json:"durability"`
	LangsmithTracer   json.RawMessage `json:"langsmith_tracer"`
}

type command struct {
	Resume json.RawMessage `json:"resume"`
	Goto   json.RawMessage `json:"goto"`
	Update json.RawMessage `json:"update"`
}

// inputMessage is one message of input.messages: a LangChain message as
// JSON, or the {role, content} shorthand.
type inputMessage struct {
	Type             string          `json:"type"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ID               *string         `json:"id"`
	Name             *string         `json:"name"`
	AdditionalKwargs json.RawMessage `json:"additional_kwargs"`
	ResponseMetadata json.RawMessage `json:"response_metadata"`
	Example          *bool           `json:"example"`
}

// runPlan is a checked run request.
type runPlan struct {
	thread             string
	stateless          bool
	assistant          Assistant
	posts              []post
	resume             bool
	strategy           string
	checkpoint         uint64
	after              time.Duration
	create             bool
	modes              []string
	cancelOnDisconnect bool
	deleteAfter        bool
	webhook            string
	tagged             bool // the thread's graph_id is the assistant's already
}

type post struct{ id, text string }

// streamModes are the modes the API streams; the others LangGraph has are
// accepted and stream nothing.
var streamModes = []string{"values", "updates", "messages-tuple", "events", "messages", "custom", "debug", "tasks", "checkpoints"}

func parseModes(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return []string{"values"}, nil
	}
	var modes []string
	var one string
	if json.Unmarshal(raw, &one) == nil {
		modes = []string{one}
	} else if err := json.Unmarshal(raw, &modes); err != nil {
		return nil, errorf(http.StatusUnprocessableEntity, "stream_mode: want a mode or a list of modes")
	}
	for _, m := range modes {
		if !slices.Contains(streamModes, m) {
			return nil, errorf(http.StatusUnprocessableEntity, "stream_mode %q: want values, updates, messages-tuple or events", m)
		}
	}
	if len(modes) == 0 {
		modes = []string{"values"}
	}
	return modes, nil
}

// textOf reads a message's content: a string, or a list of content blocks
// whose text blocks are joined.
func textOf(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", errorf(http.StatusUnprocessableEntity, "message content: want a string or a list of text blocks")
	}
	var b strings.Builder
	for _, bl := range blocks {
		if bl.Type != "text" {
			return "", errorf(http.StatusUnprocessableEntity, "message content block of type %q: only text is supported", bl.Type)
		}
		b.WriteString(bl.Text)
	}
	return b.String(), nil
}

func nullish(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// plan checks a run request against the API's mapping; nothing is written.
func (s *Server) plan(q *runCreate, thread string) (*runPlan, error) {
	p := &runPlan{thread: thread}
	if thread == "" {
		p.thread, p.stateless, p.create = newUUID(), true, true
		p.deleteAfter = q.OnCompletion != "keep"
	} else if err := validThread(thread); err != nil {
		return nil, err
	}
	if q.AssistantID == "" {
		return nil, errorf(http.StatusUnprocessableEntity, "assistant_id is required")
	}
	a, err := s.assistantOr404(q.AssistantID)
	if err != nil {
		return nil, err
	}
	p.assistant = a
	if p.modes, err = parseModes(q.StreamMode); err != nil {
		return nil, err
	}
	switch q.MultitaskStrategy {
	case "":
		p.strategy = "reject" // LangGraph's default
	case "reject", "enqueue", "interrupt", "rollback":
		p.strategy = q.MultitaskStrategy
	default:
		return nil, errorf(http.StatusUnprocessableEntity, "multitask_strategy %q: want reject, enqueue, interrupt or rollback", q.MultitaskStrategy)
	}
	switch q.IfNotExists {
	case "", "reject":
	case "create":
		p.create = true
	default:
		return nil, errorf(http.StatusUnprocessableEntity, "if_not_exists %q: want create or reject", q.IfNotExists)
	}
	switch q.OnDisconnect {
	case "", "continue":
	case "cancel":
		p.cancelOnDisconnect = true
	default:
		return nil, errorf(http.StatusUnprocessableEntity, "on_disconnect %q: want cancel or continue", q.OnDisconnect)
	}
	if q.OnCompletion != "" && q.OnCompletion != "delete" && q.OnCompletion != "keep" {
		return nil, errorf(http.StatusUnprocessableEntity, "on_completion %q: want delete or keep", q.OnCompletion)
	}
	if !nullish(q.InterruptBefore) || !nullish(q.InterruptAfter) {
		var l []string
		_ = json.Unmarshal(q.InterruptBefore, &l)
		var l2 []string
		_ = json.Unmarshal(q.InterruptAfter, &l2)
		if len(l)+len(l2) > 0 {
			return nil, errorf(http.StatusUnprocessableEntity, "interrupt_before/interrupt_after: an artifactr agent is one node; interrupt from the agent (a request) instead")
		}
	}
	if q.AfterSeconds != nil {
		if *q.AfterSeconds < 0 || *q.AfterSeconds > 24*3600 {
			return nil, errorf(http.StatusUnprocessableEntity, "after_seconds %v: want 0 to 86400", *q.AfterSeconds)
		}
		p.after = time.Duration(*q.AfterSeconds * float64(time.Second))
	}
	if q.Webhook != "" {
		u, err := url.Parse(q.Webhook)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errorf(http.StatusUnprocessableEntity, "webhook %q: want an http or https URL", q.Webhook)
		}
		p.webhook = q.Webhook
	}
	cp := q.CheckpointID
	if q.Checkpoint != nil && q.Checkpoint.CheckpointID != "" {
		cp = q.Checkpoint.CheckpointID
	}
	if cp != "" {
		if p.checkpoint, err = parseCheckpoint(cp); err != nil {
			return nil, err
		}
		if p.stateless {
			return nil, errorf(http.StatusUnprocessableEntity, "checkpoint_id needs a thread")
		}
	}
	if q.Command != nil {
		if !nullish(q.Command.Goto) || !nullish(q.Command.Update) {
			return nil, errorf(http.StatusUnprocessableEntity, "command: only resume is supported (it answers the open request)")
		}
		if nullish(q.Command.Resume) {
			return nil, errorf(http.StatusUnprocessableEntity, "command: resume is required")
		}
		if !nullish(q.Input) {
			return nil, errorf(http.StatusUnprocessableEntity, "give input or command, not both")
		}
		text := string(q.Command.Resume)
		var str string
		if json.Unmarshal(q.Command.Resume, &str) == nil {
			text = str
		}
		p.resume = true
		p.posts = []post{{id: newUUID(), text: text}}
		return p, nil
	}
	if err := p.readInput(q.Input); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *runPlan) readInput(raw json.RawMessage) error {
	if nullish(raw) {
		return errorf(http.StatusUnprocessableEntity, "a run needs input.messages or command.resume: an artifactr run is an agent turn on a posted message")
	}
	var in map[string]json.RawMessage
	if err := json.Unmarshal(raw, &in); err != nil {
		return errorf(http.StatusUnprocessableEntity, "input: want an object with messages")
	}
	for k := range in {
		if k != "messages" {
			return errorf(http.StatusUnprocessableEntity, "input.%s: the state of an artifactr thread is its messages; only input.messages is supported", k)
		}
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(in["messages"], &msgs); err != nil || len(msgs) == 0 {
		var one json.RawMessage
		if err != nil && json.Unmarshal(in["messages"], &one) == nil && len(one) > 0 && one[0] == '{' {
			msgs = []json.RawMessage{one}
		} else {
			return errorf(http.StatusUnprocessableEntity, "input.messages: want a non-empty list of messages")
		}
	}
	for i, raw := range msgs {
		var m inputMessage
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil {
			return errorf(http.StatusUnprocessableEntity, "input.messages[%d]: %v", i, err)
		}
		kind := m.Type
		if kind == "" {
			kind = m.Role
		}
		if kind != "human" && kind != "user" {
			return errorf(http.StatusUnprocessableEntity, "input.messages[%d]: type %q: a post is the user's (human) message; agents' replies are written by runs", i, kind)
		}
		text, err := textOf(m.Content)
		if err != nil {
			return err
		}
		id := newUUID()
		if m.ID != nil && *m.ID != "" {
			if err := events.ValidateMessageID(*m.ID); err != nil {
				return errorf(http.StatusUnprocessableEntity, "input.messages[%d].id %q: artifactr message ids are 1 to 128 characters from [A-Za-z0-9_-]", i, *m.ID)
			}
			id = *m.ID
		}
		p.posts = append(p.posts, post{id: id, text: text})
	}
	return nil
}

// runID is the LangGraph run id of a plan: its last message's id.
func (p *runPlan) runID() string { return p.posts[len(p.posts)-1].id }

// forkID is the thread a run from a checkpoint runs on: derived from the
// source, the checkpoint and the run, so that a retried create forks into
// the same thread.
func forkID(thread string, seq uint64, run string) string {
	h := sha1.Sum([]byte(fmt.Sprintf("artifactr-fork:%s:%d:%s", thread, seq, run)))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// start carries out p: the thread is created or forked if asked, then the
// posts are made (or scheduled, after_seconds). It returns the run as it
// stands, pending.
func (s *Server) start(ctx context.Context, p *runPlan) (run runJSON, f *follower, err error) {
	if f, err = s.followThread(ctx, p.thread); err != nil {
		return runJSON{}, nil, err
	}
	defer func() {
		if err != nil {
			s.unfollow(f)
			f = nil
		}
	}()
	t := f.t
	exists := t.LastSeq > 0
	switch {
	case exists && t.DeletedSeq != 0:
		return runJSON{}, nil, errorf(http.StatusNotFound, "thread %s was deleted", p.thread)
	case !exists && !p.create:
		return runJSON{}, nil, errorf(http.StatusNotFound, "thread %s not found (pass if_not_exists: \"create\" to create it)", p.thread)
	case !exists && p.checkpoint != 0:
		return runJSON{}, nil, errorf(http.StatusNotFound, "thread %s not found", p.thread)
	case !exists:
		if _, _, err := s.c.CreateThread(ctx, p.thread, p.graphMetadata()); err != nil {
			return runJSON{}, nil, err
		}
		p.tagged = true // the created event carries them
	}
	if old := findMessage(t, p.runID()); old != nil {
		// A retried create: the same message id is the same run.
		s.unfollow(f) // followed from its first event by whoever waits
		return s.runJSONOf(t, old, runOf(t, old)), nil, nil
	}
	if p.checkpoint != 0 {
		if p.checkpoint > t.LastSeq {
			return runJSON{}, nil, errorf(http.StatusNotFound, "checkpoint %d is after thread %s's last event %d", p.checkpoint, p.thread, t.LastSeq)
		}
		id := forkID(p.thread, p.checkpoint, p.runID())
		if _, err = s.fork(ctx, t, p.checkpoint, id); err != nil {
			return runJSON{}, nil, err
		}
		s.unfollow(f)
		if f, err = s.followThread(ctx, id); err != nil {
			return runJSON{}, nil, err
		}
		t, p.thread = f.t, id
	}
	strategy := p.strategy
	if len(t.OpenRequests()) > 0 {
		strategy = "enqueue" // the post answers the open request
	} else if p.resume {
		return runJSON{}, nil, errorf(http.StatusConflict, "command.resume: thread %s has no open interrupt (request) to resume", p.thread)
	}
	now := s.cfg.Now()
	if p.after > 0 {
		d, err := s.schedule(ctx, p, strategy, now)
		if err != nil {
			return runJSON{}, nil, err
		}
		s.tagGraph(ctx, t, p)
		return s.delayedJSON(d), f, nil
	}
	seq, err := s.postAll(ctx, p, strategy)
	if err != nil {
		return runJSON{}, nil, err
	}
	s.tagGraph(ctx, t, p)
	return runJSON{RunID: p.runID(), ThreadID: p.thread, AssistantID: p.assistant.ID(), CreatedAt: isoTime(now), UpdatedAt: isoTime(now),
		Status: "pending", Metadata: map[string]any{}, MultitaskStrategy: &p.strategy, Kwargs: map[string]any{}, MessageSeq: seq}, f, nil
}

// graphMetadata is the thread metadata a run of p's assistant gives its
// thread, as LangGraph's server does: graph_id and assistant_id.
func (p *runPlan) graphMetadata() string {
	b, _ := json.Marshal(map[string]string{"graph_id": p.assistant.GraphID, "assistant_id": p.assistant.ID()})
	return string(b)
}

// tagGraph sets the thread's graph_id and assistant_id metadata to p's
// assistant, as LangGraph's server does when it creates a run, once the
// run's post is made (a refused post writes nothing). It writes only when
// they change, so a thread with one assistant gets one such event; the
// run id makes the write idempotent. A failed write is logged, not
// answered: the run is made, and its metadata is secondary.
func (s *Server) tagGraph(ctx context.Context, t *projections.Thread, p *runPlan) {
	if p.tagged || (metaString(t, "graph_id") == p.assistant.GraphID && metaString(t, "assistant_id") == p.assistant.ID()) {
		return
	}
	if _, err := s.c.SetMetadata(ctx, p.thread, p.graphMetadata(), "graph-"+p.runID()); err != nil {
		s.log.Warn("setting a thread's graph_id failed", "thread", p.thread, "run", p.runID(), "err", err)
	}
}

// metaString is t's metadata key k when it is a string, else "".
func metaString(t *projections.Thread, k string) string {
	var v string
	_ = json.Unmarshal(t.Metadata[k], &v)
	return v
}

// messages are p's posts as they are made: the first with the strategy (a
// reject post that finds a run active writes nothing), the rest enqueued
// behind it, the webhook on the last, the assistant when not the default.
func (s *Server) messages(p *runPlan, strategy string) []client.DelayedMessage {
	out := make([]client.DelayedMessage, len(p.posts))
	for i, m := range p.posts {
		out[i] = client.DelayedMessage{ID: m.id, Text: m.text, Author: "user", Strategy: strategy}
		if i > 0 {
			out[i].Strategy = "enqueue"
		}
		if p.assistant.GraphID != s.cfg.Default {
			out[i].Assistant = p.assistant.GraphID
		}
		if i == len(p.posts)-1 {
			out[i].Webhook = p.webhook
		}
	}
	return out
}

// postAll posts p's messages and returns the last one's sequence.
func (s *Server) postAll(ctx context.Context, p *runPlan, strategy string) (uint64, error) {
	var seq uint64
	for _, m := range s.messages(p, strategy) {
		opts := []client.PostOption{client.WithMessageID(m.ID), client.WithAuthor(m.Author), client.WithStrategy(m.Strategy),
			client.WithAssistant(m.Assistant), client.WithWebhook(m.Webhook)}
		posted, err := s.c.Post(ctx, p.thread, m.Text, opts...)
		if err != nil {
			if errors.Is(err, events.ErrThreadBusy) {
				return 0, errorf(http.StatusConflict, "thread %s is busy: a run is active and multitask_strategy is reject; nothing was written", p.thread)
			}
			return 0, err
		}
		seq = posted.Seq
	}
	return seq, nil
}

// runJSONOf is the Run of message m.
func (s *Server) runJSONOf(t *projections.Thread, m *projections.Message, lr lgRun) runJSON {
	a, ok := s.assistant(m.Assistant)
	if !ok {
		a, _ = s.assistant(s.cfg.Default)
	}
	j := runJSON{
		RunID: m.MessageID, ThreadID: t.ID, AssistantID: a.ID(), CreatedAt: isoTime(m.Posted), UpdatedAt: isoTime(m.Posted),
		Status: lr.Status, Metadata: map[string]any{}, Kwargs: map[string]any{}, MessageSeq: m.Seq,
	}
	if m.Strategy != "" {
		st := string(m.Strategy)
		j.MultitaskStrategy = &st
	}
	if lr.Run != nil {
		j.ArtifactrRun = lr.Run.ID
	}
	return j
}

func (s *Server) readRun(w http.ResponseWriter, r *http.Request, thread string) (*runCreate, *runPlan, error) {
	var q runCreate
	if err := decode(r, &q, false); err != nil {
		return nil, nil, err
	}
	p, err := s.plan(&q, thread)
	if err != nil {
		return nil, nil, err
	}
	return &q, p, nil
}

func runPath(thread, run string) string { return "/threads/" + thread + "/runs/" + run }

func (s *Server) createRun(w http.ResponseWriter, r *http.Request) error {
	_, p, err := s.readRun(w, r, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	run, f, err := s.start(r.Context(), p)
	if err != nil {
		return err
	}
	s.unfollow(f)
	w.Header().Set("Content-Location", runPath(run.ThreadID, run.RunID))
	writeJSON(w, http.StatusOK, run)
	return nil
}

func (s *Server) waitRun(w http.ResponseWriter, r *http.Request) error {
	_, p, err := s.readRun(w, r, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	run, f, err := s.start(r.Context(), p)
	if err != nil {
		return err
	}
	defer s.unfollow(f)
	w.Header().Set("Content-Location", runPath(run.ThreadID, run.RunID))
	out, err := s.waitOutput(r.Context(), run.ThreadID, run.RunID, p.cancelOnDisconnect, f)
	if err != nil {
		return err
	}
	if p.deleteAfter {
		s.deleteQuietly(run.ThreadID)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteQuietly(thread string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 10*time.Second)
	defer cancel()
	if _, err := s.c.DeleteThread(ctx, thread); err != nil {
		s.log.Warn("deleting a stateless run's thread failed", "thread", thread, "err", err)
	}
}

// waitOutput follows run until it ends and returns what runs.wait returns:
// the thread's values then, with __interrupt__ when it ended on a request
// and __error__ when it failed.
func (s *Server) waitOutput(ctx context.Context, thread, run string, cancelOnDisconnect bool, f *follower) (map[string]any, error) {
	t, lr, err := s.waitFinal(ctx, thread, run, f)
	if err != nil {
		if cancelOnDisconnect && ctx.Err() != nil && lr.Run != nil {
			s.cancelQuietly(thread, lr.Run.ID)
		}
		return nil, err
	}
	s.caughtUp(ctx, thread, t.LastSeq) // when it followed alone, past a lost subscription
	return outputOf(t, lr), nil
}

func outputOf(t *projections.Thread, lr lgRun) map[string]any {
	out := values(t)
	if lr.Asked != nil {
		out["__interrupt__"] = []interrupt{{Value: lr.Asked.Question, ID: lr.Asked.ID}}
	}
	if lr.Status == "error" || lr.Status == "timeout" {
		reason := "run failed"
		if lr.Run != nil && lr.Run.Reason != "" {
			reason = lr.Run.Reason
		}
		out["__error__"] = map[string]string{"error": "RunError", "message": reason}
	}
	return out
}

func (s *Server) cancelQuietly(thread, run string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 10*time.Second)
	defer cancel()
	if _, err := s.c.Cancel(ctx, thread, run, ""); err != nil {
		s.log.Warn("cancel on disconnect failed", "thread", thread, "run", run, "err", err)
	}
}

// follower is a thread's fold and a subscription to its later events,
// made before the fold was read, so that no event falls between the two.
type follower struct {
	t   *projections.Thread
	sub *sub // nil: follow with a consumer of its own
}

// followThread subscribes to thread, then folds it (an empty fold when it
// has no events yet).
func (s *Server) followThread(ctx context.Context, thread string) (*follower, error) {
	// The hub's fold is as new as anything the API has answered: every
	// answer waits for the hub to reach what it read or wrote (caughtUp).
	sb, t, hf := s.hub.subscribe(thread)
	if t != nil {
		return &follower{t: t, sub: sb}, nil
	}
	f := &follower{sub: sb, t: projections.New(thread)}
	envs, err := s.c.Events(ctx, thread)
	switch {
	case errors.Is(err, client.ErrNoEvents):
	case err != nil:
		s.hub.unsubscribe(f.sub)
		return nil, err
	}
	if hf != nil {
		s.hub.verify(thread, hf, envs)
	}
	for _, env := range envs {
		f.t.Apply(env)
	}
	return f, nil
}

func (s *Server) unfollow(f *follower) {
	if f != nil {
		s.hub.unsubscribe(f.sub)
	}
}

// follow folds thread's events as they come and calls step after each
// with the fold and the LangGraph run of message run, once it is posted;
// it ends when step says so or ctx ends. With f (from followThread) it
// goes on from f's fold, and step sees only the events after it;
// otherwise it folds the thread from its first event, step seeing each.
func (s *Server) follow(ctx context.Context, thread, run string, f *follower, step func(t *projections.Thread, env events.Envelope, prev, cur lgRun, posted bool) bool) error {
	t := projections.New(thread)
	idx := -1
	prev := lgRun{Status: "pending"}
	apply := func(env events.Envelope) bool {
		t.Apply(env)
		if idx < 0 {
			for i := len(t.Messages) - 1; i >= 0; i-- {
				if t.Messages[i].MessageID == run {
					idx = i
					break
				}
			}
		}
		if idx < 0 {
			return step(t, env, prev, prev, false)
		}
		cur := runOf(t, &t.Messages[idx])
		done := step(t, env, prev, cur, true)
		prev = cur
		return done
	}
	if f == nil {
		sb, _, _ := s.hub.subscribe(thread)
		f = &follower{sub: sb}
		defer s.unfollow(f)
		envs, err := s.c.Events(ctx, thread)
		if err != nil && !errors.Is(err, client.ErrNoEvents) {
			return err
		}
		for _, env := range envs {
			if apply(env) {
				return nil
			}
		}
	} else {
		t = f.t
		for i := range t.Messages {
			if t.Messages[i].MessageID == run {
				idx = i
				prev = runOf(t, &t.Messages[i])
			}
		}
	}
	if f.sub != nil {
		for {
			select {
			case e, ok := <-f.sub.ch:
				if !ok {
					goto own // fell behind: follow on alone
				}
				env := *e
				if env.Seq <= t.LastSeq {
					continue
				}
				if apply(env) {
					return nil
				}
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
	}
own:
	for env, err := range s.c.Watch(ctx, thread, t.LastSeq+1) {
		if err != nil {
			return err
		}
		if env.Seq <= t.LastSeq {
			continue
		}
		if apply(env) {
			return nil
		}
	}
	return context.Cause(ctx)
}

// waitFinal follows run until its status is final.
func (s *Server) waitFinal(ctx context.Context, thread, run string, f *follower) (*projections.Thread, lgRun, error) {
	var t *projections.Thread
	var last lgRun
	err := s.follow(ctx, thread, run, f, func(ft *projections.Thread, _ events.Envelope, _, cur lgRun, posted bool) bool {
		last = cur
		if posted && cur.Final() {
			t = ft
			return true
		}
		return false
	})
	if t == nil {
		if err == nil {
			err = ctx.Err()
		}
		return nil, last, fmt.Errorf("waiting for run %s of %s: %w", run, thread, err)
	}
	return t, last, nil
}

// existingRun returns the fold and the run's message, or a 404.
func (s *Server) existingRun(ctx context.Context, thread, run string) (*projections.Thread, *projections.Message, error) {
	t, err := s.loadThread(ctx, thread)
	if err != nil {
		return nil, nil, err
	}
	m := findMessage(t, run)
	if m == nil || (m.Consumed != nil && m.Consumed.Kind == projections.ConsumedForked) {
		return nil, nil, errorf(http.StatusNotFound, "run %s not found in thread %s", run, thread)
	}
	return t, m, nil
}

// joinable returns nil when run is posted, or delayed and still to be
// posted, and a 404 or 409 otherwise.
func (s *Server) joinable(ctx context.Context, thread, run string) error {
	_, _, d, err := s.existingOrDelayed(ctx, thread, run)
	if err == nil && d != nil && d.Posted == 0 && !d.Pending() {
		return errorf(http.StatusConflict, "run %s (after_seconds) was never posted: %s", run, d.Failed)
	}
	return err
}

// existingOrDelayed is existingRun, or the run's delayed post when its
// message is not in the thread yet: d is set and m nil then.
func (s *Server) existingOrDelayed(ctx context.Context, thread, run string) (t *projections.Thread, m *projections.Message, d *client.Delayed, err error) {
	t, m, err = s.existingRun(ctx, thread, run)
	if err == nil || !isStatus(err, http.StatusNotFound) {
		return t, m, nil, err
	}
	dp, found, derr := s.c.DelayedPost(ctx, s.cfg.DelayedBucket, thread, run)
	switch {
	case derr != nil:
		return nil, nil, nil, derr
	case !found:
		return nil, nil, nil, err
	}
	return t, nil, &dp, nil
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) error {
	thread, run := r.PathValue("thread_id"), r.PathValue("run_id")
	t, m, d, err := s.existingOrDelayed(r.Context(), thread, run)
	if err != nil {
		return err
	}
	if d != nil {
		writeJSON(w, http.StatusOK, s.delayedJSON(*d))
		return nil
	}
	writeJSON(w, http.StatusOK, s.runJSONOf(t, m, runOf(t, m)))
	return nil
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, offset := 10, 0
	var err error
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil {
			return errorf(http.StatusUnprocessableEntity, "limit %q: want a number", v)
		}
	}
	if v := q.Get("offset"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil {
			return errorf(http.StatusUnprocessableEntity, "offset %q: want a number", v)
		}
	}
	if _, err := pageLimit(&limit, offset); err != nil {
		return err
	}
	status := q.Get("status")
	t, err := s.loadThread(r.Context(), r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	all := []runJSON{}
	// Delayed runs not posted yet come first, newest first: they were
	// created after every posted one but the few posted since.
	delayed, err := s.c.DelayedPosts(r.Context(), s.cfg.DelayedBucket, t.ID)
	if err != nil {
		return err
	}
	for i := len(delayed) - 1; i >= 0; i-- {
		if findMessage(t, delayed[i].Run) != nil {
			continue // posted since the key was read
		}
		if j := s.delayedJSON(delayed[i]); status == "" || j.Status == status {
			all = append(all, j)
		}
	}
	for i := len(t.Messages) - 1; i >= 0; i-- {
		m := &t.Messages[i]
		if m.Consumed != nil && m.Consumed.Kind == projections.ConsumedForked {
			continue
		}
		j := s.runJSONOf(t, m, runOf(t, m))
		if status == "" || j.Status == status {
			all = append(all, j)
		}
	}
	writeJSON(w, http.StatusOK, page(all, offset, limit))
	return nil
}

// deleteRun refuses: a run is a posted message and the events of the run
// that took it, part of the thread's log, which is the audit log and never
// loses an event. Deleting the thread writes a tombstone instead.
func (s *Server) deleteRun(w http.ResponseWriter, r *http.Request) error {
	if _, _, _, err := s.existingOrDelayed(r.Context(), r.PathValue("thread_id"), r.PathValue("run_id")); err != nil {
		return err
	}
	w.Header().Set("Allow", "GET")
	return errorf(http.StatusMethodNotAllowed, "runs cannot be deleted: a run is part of its thread's log, the audit log; delete the thread (a tombstone) or cancel the run")
}

func boolParam(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	}
	return false, errorf(http.StatusUnprocessableEntity, "%q: want true or false", v)
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	wait, err := boolParam(q.Get("wait"))
	if err != nil {
		return err
	}
	action := q.Get("action")
	if action != "" && action != "interrupt" && action != "rollback" {
		return errorf(http.StatusUnprocessableEntity, "action %q: want interrupt or rollback", action)
	}
	thread, run := r.PathValue("thread_id"), r.PathValue("run_id")
	t, m, d, err := s.existingOrDelayed(r.Context(), thread, run)
	if err != nil {
		return err
	}
	if d != nil {
		// Not posted yet: cancelled in its key, it is never posted. One
		// posted meanwhile is cancelled as a posted run.
		cd, _, err := s.c.CancelDelayed(r.Context(), s.cfg.DelayedBucket, thread, run)
		if err != nil {
			return err
		}
		if cd.Posted == 0 {
			if wait {
				w.WriteHeader(http.StatusNoContent)
			} else {
				w.WriteHeader(http.StatusAccepted)
			}
			return nil
		}
		if t, m, err = s.existingRun(r.Context(), thread, run); err != nil {
			return errorf(http.StatusConflict, "run %s was posted just now; cancel it again", run)
		}
	}
	lr := runOf(t, m)
	switch {
	case lr.Status == "pending":
		return errorf(http.StatusConflict, "run %s is pending: its message is posted and cannot be withdrawn; cancel it once it runs", run)
	case lr.Status == "running":
		cancel := s.c.Cancel
		if action == "rollback" {
			cancel = s.c.CancelRollback
		}
		seq, err := cancel(r.Context(), thread, lr.Run.ID, "")
		if err != nil {
			return err
		}
		s.caughtUp(r.Context(), thread, seq)
	}
	if !wait {
		w.WriteHeader(http.StatusAccepted)
		return nil
	}
	if _, _, err := s.waitFinal(r.Context(), thread, run, nil); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) joinRun(w http.ResponseWriter, r *http.Request) error {
	thread, run := r.PathValue("thread_id"), r.PathValue("run_id")
	cancelOnDisconnect, err := boolParam(r.URL.Query().Get("cancel_on_disconnect"))
	if err != nil {
		return err
	}
	if err := s.joinable(r.Context(), thread, run); err != nil {
		return err
	}
	out, err := s.waitOutput(r.Context(), thread, run, cancelOnDisconnect, nil)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
