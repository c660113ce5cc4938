package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/httpapi"
	"github.com/artifactr/artifactr/internal/testkit"
)

var httpRE = regexp.MustCompile(`HTTP API listening on (http://\S+)`)

// A non-loopback --http without --auth is refused before anything is
// opened; so are bad --config files.
func TestRun_serveHTTPRefused(t *testing.T) {
	t.Setenv(envNATS, "")
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"graphs":{"x":{"agent":"telepathy"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"non-loopback", []string{"--http", "0.0.0.0:0"}, "--auth"},
		{"cors without http", []string{"--http-cors-origin", "*"}, "needs --http"},
		{"bad config", []string{"--http", "127.0.0.1:0", "--config", bad}, "telepathy"},
		{"missing config", []string{"--http", "127.0.0.1:0", "--config", filepath.Join(dir, "none.json")}, "none.json"},
		{"config and agent", []string{"--http", "127.0.0.1:0", "--config", bad, "--agent", "echo"}, "drop --agent"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := filepath.Join(dir, "data-"+strings.ReplaceAll(c.name, " ", "-"))
			code, _, stderr := runCLI(t, t.Context(), append([]string{"serve", "--data", data, "--listen", "127.0.0.1:0"}, c.args...)...)
			if code != exitUsage || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, stderr %q: want %d and %q", code, stderr, exitUsage, c.want)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Fatalf("the data directory was made: %v", err)
			}
		})
	}
}

// A taken --http address fails before anything is opened.
func TestRun_serveHTTPTaken(t *testing.T) {
	t.Setenv(envNATS, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := filepath.Join(t.TempDir(), "data")
	code, _, stderr := runCLI(t, t.Context(), "serve", "--data", data, "--listen", "127.0.0.1:0", "--http", ln.Addr().String())
	if code != exitFail || !strings.Contains(stderr, ln.Addr().String()) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the data directory was made: %v", err)
	}
}

// serve --http --config --auth: the assistants answer, tokens are kept
// mode 0600 in DATA/auth, a request without one is 401.
func TestRun_serveHTTP(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "artifactr.json")
	if err := os.WriteFile(cfg, []byte(`{"graphs":{"echo":{"agent":"echo"},"other":{"agent":"echo","delay":"1ms"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	s := startServe(t, data, "--http", "127.0.0.1:0", "--config", cfg, "--auth")
	defer s.stop()
	m := httpRE.FindStringSubmatch(s.out.String())
	if m == nil {
		t.Fatalf("no HTTP line:\n%s", s.out.String())
	}
	url := m[1]
	tokFile := filepath.Join(data, "auth", httpapi.ClientTokenFile)
	st, err := os.Stat(tokFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file %s: %v %v", tokFile, st, err)
	}
	tok, _ := os.ReadFile(tokFile)
	do := func(method, path, body, token string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), method, url+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := do("POST", "/threads", `{"thread_id":"t1"}`, ""); code != 401 {
		t.Fatalf("no token: %d %s", code, body)
	}
	for _, a := range []string{"echo", "other"} {
		code, body := do("POST", "/threads/t1/runs/wait", `{"assistant_id":"`+a+`","if_not_exists":"create","input":{"messages":[{"role":"user","content":"hi `+a+`"}]}}`, strings.TrimSpace(string(tok)))
		if code != 200 || !strings.Contains(body, "echo: hi "+a) {
			t.Fatalf("%s: %d %s", a, code, body)
		}
	}
	code, body := do("GET", "/threads/t1/runs", "", strings.TrimSpace(string(tok)))
	if code != 200 || !strings.Contains(body, `"assistant_id":"`+httpapi.Assistant{GraphID: "other"}.ID()+`"`) {
		t.Fatalf("runs: %d %s", code, body)
	}
	// A delayed run under --auth: the client role stores it in the
	// delayed-post bucket (admin made it) and drains it.
	code, body = do("POST", "/threads/t1/runs", `{"assistant_id":"echo","after_seconds":0.1,"multitask_strategy":"enqueue","input":{"messages":[{"role":"user","content":"later","id":"later-1"}]}}`, strings.TrimSpace(string(tok)))
	if code != 200 || !strings.Contains(body, `"status":"pending"`) {
		t.Fatalf("delayed run: %d %s", code, body)
	}
	testkit.WaitFor(t, 20*time.Second, "the delayed run to complete", func() (bool, string) {
		code, body := do("GET", "/threads/t1/runs/later-1", "", strings.TrimSpace(string(tok)))
		return code == 200 && strings.Contains(body, `"status":"success"`), fmt.Sprint(code, body)
	})
}
