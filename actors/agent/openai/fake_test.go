package openai_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// fakeServer is an in-process chat-completions server. Each request is
// handled by the next of its handlers (the last one repeats), which write
// the real streaming format through an sseWriter.
type fakeServer struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex // protects following fields
	handlers []handler
	reqs     []recorded
}

// handler answers the n-th request (from 0).
type handler func(w http.ResponseWriter, r *http.Request, n int)

// recorded is a request as the server got it.
type recorded struct {
	Header http.Header
	Path   string
	Body   wireRequest
}

// wireRequest decodes what the agent sends, independently of the
// package's own types, so a change to them cannot hide a wire change.
type wireRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role       string  `json:"role"`
		Content    *string `json:"content"`
		Name       string  `json:"name"`
		ToolCallID string  `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

func newFakeServer(t *testing.T, hs ...handler) *fakeServer {
	t.Helper()
	f := &fakeServer{t: t, handlers: hs}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req wireRequest
	if err := json.Unmarshal(body, &req); err != nil {
		f.t.Errorf("fake server: request body is not JSON: %v: %s", err, body)
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	n := len(f.reqs)
	f.reqs = append(f.reqs, recorded{Header: r.Header.Clone(), Path: r.URL.Path, Body: req})
	h := f.handlers[min(n, len(f.handlers)-1)]
	f.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	h(w, r, n)
}

// url is the base URL to give the agent.
func (f *fakeServer) url() string { return f.srv.URL + "/v1" }

func (f *fakeServer) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

// sseWriter writes server-sent events as OpenAI does: "data: ...\n\n",
// flushed one by one.
type sseWriter struct {
	w http.ResponseWriter
}

// startStream sends the headers of a 200 event stream.
func startStream(w http.ResponseWriter) *sseWriter {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	return &sseWriter{w: w}
}

// raw writes s as it is, and flushes.
func (s *sseWriter) raw(str string) {
	io.WriteString(s.w, str)
	s.w.(http.Flusher).Flush()
}

// data writes one event whose data is v as JSON.
func (s *sseWriter) data(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	s.raw("data: " + string(b) + "\n\n")
}

// content sends a chunk whose delta is text.
func (s *sseWriter) content(text string) {
	s.data(chunkJSON(map[string]any{"content": text}, nil))
}

// toolDelta sends a piece of a tool call; id and name only when not empty.
func (s *sseWriter) toolDelta(index int, id, name, args string) {
	fn := map[string]any{"arguments": args}
	if name != "" {
		fn["name"] = name
	}
	tc := map[string]any{"index": index, "function": fn}
	if id != "" {
		tc["id"], tc["type"] = id, "function"
	}
	s.data(chunkJSON(map[string]any{"tool_calls": []any{tc}}, nil))
}

// finish sends the last chunk, with finish_reason, then [DONE].
func (s *sseWriter) finish(reason string) {
	s.data(chunkJSON(map[string]any{}, &reason))
	s.raw("data: [DONE]\n\n")
}

// chunkJSON is a chat.completion.chunk as OpenAI streams it.
func chunkJSON(delta map[string]any, finish *string) map[string]any {
	return map[string]any{
		"id":      "chatcmpl-fake",
		"object":  "chat.completion.chunk",
		"created": 1700000000,
		"model":   "fake-model",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
	}
}

// streamText is a handler that streams parts as content chunks.
func streamText(parts ...string) handler {
	return func(w http.ResponseWriter, r *http.Request, n int) {
		s := startStream(w)
		s.data(chunkJSON(map[string]any{"role": "assistant", "content": ""}, nil))
		for _, p := range parts {
			s.content(p)
		}
		s.finish("stop")
	}
}

// fail is a handler that answers status with body and headers.
func fail(status int, body string, header ...string) handler {
	return func(w http.ResponseWriter, r *http.Request, n int) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}
}
