package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestServe_openaiUsage(t *testing.T) {
	t.Setenv(envNATS, "") // usage errors come before any server
	empty := filepath.Join(t.TempDir(), "empty.txt")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--agent", "openai", "--model", "m"}, "needs --base-url"},
		{[]string{"--agent", "openai", "--base-url", "http://localhost:11434/v1"}, "needs --model"},
		{[]string{"--agent", "openai", "--base-url", "localhost:11434", "--model", "m"}, "want an http:// or https:// URL"},
		{[]string{"--agent", "openai", "--base-url", "http://x/v1", "--model", "m", "--system", "/no/such/file"}, "--system: open /no/such/file"},
		{[]string{"--agent", "openai", "--base-url", "http://x/v1", "--model", "m", "--system", empty}, "the file is empty"},
		{[]string{"--agent", "openai", "--base-url", "http://x/v1", "--model", "m", "--openai-timeout", "0s"}, "--openai-timeout 0s: must be positive"},
		{[]string{"--agent", "openai", "--base-url", "http://x/v1", "--model", "m", "--", "python3"}, "--agent openai takes no program"},
		{[]string{"--model", "llama3.2"}, "--model is for --agent openai, not echo"},
		{[]string{"--agent", "exec", "--base-url", "http://x/v1", "--", "true"}, "--base-url is for --agent openai, not exec"},
		{[]string{"--agent", "gpt"}, "want echo, exec or openai"},
	} {
		code, _, stderr := runCLI(t, t.Context(), append([]string{"serve"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("serve %v: exit %d, stderr:\n%s\nwant exit %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}

// serve --agent openai answers through a chat-completions server, with
// the key from OPENAI_API_KEY and the system prompt from --system; an
// ask_user call is a request that the next post answers.
func TestServe_openaiAgent(t *testing.T) {
	var (
		mu   sync.Mutex // protects reqs
		reqs []map[string]any
		auth []string
	)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		reqs = append(reqs, req)
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		msgs := req["messages"].([]any)
		last := msgs[len(msgs)-1].(map[string]any)
		w.Header().Set("Content-Type", "text/event-stream")
		delta := func(d string) { fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":%s}]}\n\n", d) }
		switch {
		case last["role"] == "tool":
			delta(fmt.Sprintf(`{"content":%q}`, "Nice to meet you, "+last["content"].(string)+"."))
		case strings.Contains(last["content"].(string), "name"):
			delta(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"ask_user","arguments":""}}]}`)
			delta(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"question\":\"What is your name?\"}"}}]}`)
		default:
			// One delta: post --wait joins a run's outputs with "\n",
			// and two deltas may be emitted apart.
			delta(`{"content":"Hello there"}`)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(fake.Close)
	system := filepath.Join(t.TempDir(), "system.txt")
	if err := os.WriteFile(system, []byte("Be kind.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envOpenAIKey, "sk-test")
	url, out := serveInProcess(t, "--agent", "openai", "--base-url", fake.URL+"/v1", "--model", "tiny", "--system", system)
	if !strings.Contains(out.String(), "(agent openai:tiny,") {
		t.Errorf("serve does not name the agent:\n%s", out.String())
	}

	code, stdout, stderr := runCLI(t, t.Context(), "post", "o1", "hi", "--wait", "--nats", url)
	if code != 0 || lastLine(stdout) != "Hello there" {
		t.Fatalf("post --wait: exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, t.Context(), "post", "o1", "ask my name", "--wait", "--nats", url)
	if code != 0 || !strings.Contains(stdout, "What is your name?") {
		t.Fatalf("post --wait of the ask: exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, t.Context(), "post", "o1", "Ada", "--wait", "--nats", url)
	if code != 0 || lastLine(stdout) != "Nice to meet you, Ada." {
		t.Fatalf("post --wait of the answer: exit %d, stdout %q\n%s", code, stdout, stderr)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, a := range auth {
		if a != "Bearer sk-test" {
			t.Errorf("request %d: Authorization %q", i, a)
		}
	}
	first := reqs[0]["messages"].([]any)
	if m := first[0].(map[string]any); m["role"] != "system" || m["content"] != "Be kind." || reqs[0]["model"] != "tiny" {
		t.Errorf("first request: model %v, first message %v", reqs[0]["model"], m)
	}
	// The second turn sees the conversation: the first prompt, then the
	// first run's reply as the assistant's.
	second := reqs[1]["messages"].([]any)
	if len(second) != 4 || second[1].(map[string]any)["content"] != "hi" ||
		second[2].(map[string]any)["role"] != "assistant" || second[2].(map[string]any)["content"] != "Hello there" {
		t.Errorf("second request's messages: %v", second)
	}
}

// lastLine is the last line of post --wait's output: the run's output,
// after the message's seq.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
