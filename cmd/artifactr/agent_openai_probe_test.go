package main

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// Issue 22: serve --agent openai with a --base-url that does not answer
// starts, and warns.
func TestServe_openaiProbeWarns(t *testing.T) {
	srv := httptest.NewServer(nil)
	dead := srv.URL + "/v1"
	srv.Close()
	s := startServe(t, t.TempDir(), "--agent", "openai", "--base-url", dead, "--model", "m")
	s.stop()
	errOut := s.errOut.String()
	if !strings.Contains(errOut, " WARN ") || !strings.Contains(errOut, "--base-url") || !strings.Contains(errOut, dead+" does not answer") {
		t.Errorf("no warning about --base-url; stderr:\n%s", errOut)
	}
}

// The new limits are flags, checked like the others.
func TestServe_openaiLimitFlags(t *testing.T) {
	t.Setenv(envNATS, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--openai-max-tool-rounds", "0"}, "--openai-max-tool-rounds 0: must be positive"},
		{[]string{"--openai-max-retry-wait", "0s"}, "--openai-max-retry-wait 0s: must be positive"},
	} {
		args := append([]string{"serve", "--agent", "openai", "--base-url", "http://x/v1", "--model", "m"}, tc.args...)
		code, _, stderr := runCLI(t, t.Context(), args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tc.args, code, stderr, tc.want)
		}
	}
	code, _, stderr := runCLI(t, t.Context(), "serve", "--openai-max-tool-rounds", "3")
	if code != exitUsage || !strings.Contains(stderr, "is for --agent openai") {
		t.Errorf("with echo: exit %d, stderr %q", code, stderr)
	}
}
