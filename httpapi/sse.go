package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
)

// An SSE event's id is "SEQ-K": the stream sequence of the event it comes
// from and its index among the SSE events that event gives (every mode
// counted, so ids do not depend on the modes asked for). The events a log
// event gives are a pure function of the log up to it, so a client that
// reconnects with Last-Event-ID "SEQ-K", or joins later, gets exactly the
// events after it: none twice, none lost.

// sseEvent is one event of a run's stream.
type sseEvent struct {
	seq   uint64
	k     int
	event string
	data  any
}

func (e sseEvent) id() string { return strconv.FormatUint(e.seq, 10) + "-" + strconv.Itoa(e.k) }

// position is a parsed Last-Event-ID: events up to and including it were
// delivered.
type position struct {
	seq uint64
	k   int
}

func parseLastEventID(v string) (position, error) {
	if v == "" || v == "-1" {
		return position{}, nil
	}
	a, b, two := strings.Cut(v, "-")
	seq, err := strconv.ParseUint(a, 10, 64)
	if err != nil {
		return position{}, errorf(http.StatusUnprocessableEntity, "Last-Event-ID %q: want SEQ-K as sent in the stream's ids", v)
	}
	k := int(^uint(0) >> 1) // a bare sequence: all of its events were delivered
	if two {
		if k, err = strconv.Atoi(b); err != nil || k < 0 {
			return position{}, errorf(http.StatusUnprocessableEntity, "Last-Event-ID %q: want SEQ-K as sent in the stream's ids", v)
		}
	}
	return position{seq, k}, nil
}

func (e sseEvent) after(p position) bool { return e.seq > p.seq || (e.seq == p.seq && e.k > p.k) }

// modeOf is the stream mode an event belongs to; "" for those every stream
// gets (metadata, error, end).
func modeOf(event string) string {
	switch event {
	case "messages":
		return "messages-tuple"
	case "metadata", "error", "end":
		return ""
	}
	return event
}

// eventsOf returns the SSE events env gives for the LangGraph run of
// message run, given its state before (prev) and after (cur) env.
func eventsOf(t *projections.Thread, env events.Envelope, run string, prev, cur lgRun) []sseEvent {
	var out []sseEvent
	add := func(event string, data any) {
		out = append(out, sseEvent{seq: env.Seq, k: len(out), event: event, data: data})
	}
	m := cur.Msg
	if env.Seq == m.Seq {
		add("metadata", map[string]any{"run_id": run, "attempt": 1})
	}
	if prev.Final() {
		return out
	}
	if prev.Status == "pending" && cur.Status != "pending" {
		add("values", values(t))
		add("events", chainEvent("on_chain_start", run, map[string]any{"input": map[string]any{"messages": []message{humanMessage(m)}}}))
	}
	if r := cur.Run; r != nil && m.Consumed != nil && env.Seq > m.Consumed.Seq {
		if o := env.Event.GetRunOutput(); o != nil && o.GetRunId() == r.ID {
			chunk := aiChunk(r.ID, o.GetText())
			meta := map[string]any{"run_id": run, "thread_id": t.ID, "langgraph_node": "agent", "langgraph_step": 1, "artifactr_seq": env.Seq}
			add("messages", []any{chunk, meta})
			add("events", map[string]any{"event": "on_chat_model_stream", "name": "agent", "run_id": run, "tags": []string{}, "metadata": meta,
				"data": map[string]any{"chunk": chunk}})
		}
	}
	if !cur.Final() {
		return out
	}
	v := values(t)
	switch {
	case cur.Asked != nil:
		in := []interrupt{{Value: cur.Asked.Question, ID: cur.Asked.ID}}
		v["__interrupt__"] = in
		add("values", v)
		add("updates", map[string]any{"__interrupt__": in})
	case cur.Status == "success":
		add("values", v)
		add("updates", map[string]any{"agent": map[string]any{"messages": []message{aiMessage(cur.Run.ID, runText(cur.Run))}}})
	default:
		add("values", v)
	}
	add("events", chainEvent("on_chain_end", run, map[string]any{"output": v}))
	if cur.Status == "error" || cur.Status == "timeout" {
		reason := "run failed"
		if cur.Run != nil && cur.Run.Reason != "" {
			reason = cur.Run.Reason
		}
		add("error", map[string]string{"error": "RunError", "message": reason})
	}
	add("end", nil)
	return out
}

func chainEvent(name, run string, data map[string]any) map[string]any {
	return map[string]any{"event": name, "name": "agent", "run_id": run, "tags": []string{}, "metadata": map[string]any{}, "data": data}
}

// heartbeat is how often an idle stream sends a comment, so proxies keep
// it open and the SDK can tell a dead connection from a quiet run.
const heartbeat = 10 * time.Second

// streamEvents writes run's SSE events after pos, in modes, until its end
// event; with cancelOnDisconnect a client gone first cancels the run.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, thread, run string, modes []string, pos position, cancelOnDisconnect bool, f *follower) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Location", runPath(thread, run)+"/stream")
	h.Set("Content-Location", runPath(thread, run))
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	ch := make(chan sseEvent, 64)
	var artifactrRun string
	done := make(chan error, 1)
	go func() {
		defer close(ch)
		done <- s.follow(ctx, thread, run, f, func(t *projections.Thread, env events.Envelope, prev, cur lgRun, posted bool) bool {
			if !posted {
				return false
			}
			if cur.Run != nil {
				artifactrRun = cur.Run.ID
			}
			for _, e := range eventsOf(t, env, run, prev, cur) {
				if !e.after(pos) {
					continue
				}
				select {
				case ch <- e:
				case <-ctx.Done():
					return true
				}
			}
			return prev.Final() || cur.Final()
		})
	}()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	// gone handles a client that left before the end: a failed write, or
	// the request's context ending.
	gone := func() error {
		cancel()
		if cancelOnDisconnect {
			<-done
			if artifactrRun != "" {
				s.cancelQuietly(thread, artifactrRun)
			}
		}
		return nil
	}
	var buf []byte
	unflushed := false
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				if err := <-done; err != nil && r.Context().Err() == nil {
					buf = appendSSE(buf[:0], "", "error", map[string]string{"error": "StreamError", "message": err.Error()})
					_, _ = w.Write(buf)
					_ = rc.Flush()
				}
				return nil
			}
			if md := modeOf(e.event); md == "" || slices.Contains(modes, md) {
				buf = appendSSE(buf[:0], e.id(), e.event, e.data)
				if _, err := w.Write(buf); err != nil {
					return gone()
				}
				unflushed = true
			}
			if e.event == "end" {
				_ = rc.Flush()
				return nil
			}
			// Flush once the burst of events is written.
			if unflushed && len(ch) == 0 {
				if rc.Flush() != nil {
					return gone()
				}
				unflushed = false
			}
		case <-tick.C:
			if _, err := w.Write([]byte(": heartbeat\n\n")); err != nil || rc.Flush() != nil {
				return gone()
			}
		case <-r.Context().Done():
			return gone()
		}
	}
}

// appendSSE frames one event: id, event, one data line of JSON, and a
// blank line.
func appendSSE(buf []byte, id, event string, data any) []byte {
	if id != "" {
		buf = append(buf, "id: "...)
		buf = append(buf, id...)
		buf = append(buf, '\n')
	}
	buf = append(buf, "event: "...)
	buf = append(buf, event...)
	buf = append(buf, "\ndata: "...)
	b, err := json.Marshal(data)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"error":"EncodeError","message":%q}`, err.Error()))
	}
	buf = append(buf, b...)
	return append(buf, "\n\n"...)
}

func (s *Server) streamRun(w http.ResponseWriter, r *http.Request) error {
	_, p, err := s.readRun(w, r, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	pos, err := parseLastEventID(r.Header.Get("Last-Event-ID"))
	if err != nil {
		return err
	}
	run, f, err := s.start(r.Context(), p)
	if err != nil {
		return err
	}
	defer s.unfollow(f)
	err = s.streamEvents(w, r, run.ThreadID, run.RunID, p.modes, pos, p.cancelOnDisconnect, f)
	if p.deleteAfter {
		s.deleteQuietly(run.ThreadID)
	}
	return err
}

func (s *Server) joinStream(w http.ResponseWriter, r *http.Request) error {
	thread, run := r.PathValue("thread_id"), r.PathValue("run_id")
	q := r.URL.Query()
	cancelOnDisconnect, err := boolParam(q.Get("cancel_on_disconnect"))
	if err != nil {
		return err
	}
	modes := []string{"values"}
	if ms := q["stream_mode"]; len(ms) > 0 {
		raw, _ := json.Marshal(ms)
		if modes, err = parseModes(raw); err != nil {
			return err
		}
	}
	pos, err := parseLastEventID(r.Header.Get("Last-Event-ID"))
	if err != nil {
		return err
	}
	if err := s.joinable(r.Context(), thread, run); err != nil {
		return err
	}
	return s.streamEvents(w, r, thread, run, modes, pos, cancelOnDisconnect, nil)
}
