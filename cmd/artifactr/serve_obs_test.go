package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/testkit"
)

var metricsRE = regexp.MustCompile(`metrics on (http://[^\s]+)/metrics`)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// metricValue returns the value of the sample line that starts with series
// (name and labels exactly as exposed), or "" when there is none.
func metricValue(body, series string) string {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// serve --metrics answers /healthz and /readyz and exposes the runner's and
// the projector's metrics; post puts the caller's TRACEPARENT in the
// message's headers.
func TestRun_serveMetrics(t *testing.T) {
	url, out := serveInProcess(t, "--claim-ttl", "2s", "--metrics", "127.0.0.1:0")
	m := metricsRE.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("serve did not print its metrics address:\n%s", out.String())
	}
	base := m[1]
	if code, body := httpGet(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %s", code, body)
	}
	testkit.CheckFor(t, 10*time.Second, func() error {
		if code, body := httpGet(t, base+"/readyz"); code != http.StatusOK {
			return fmt.Errorf("/readyz: %d %s", code, body)
		}
		return nil
	})

	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	t.Setenv("TRACEPARENT", traceparent)
	ctx := t.Context()
	if code, _, errOut := runCLI(t, ctx, "post", "m1", "hello", "--wait", "--nats", url); code != exitOK {
		t.Fatalf("post --wait: exit %d: %s", code, errOut)
	}
	if code, _, _ := runCLI(t, ctx, "post", "m1", "fail: on purpose", "--wait", "--nats", url); code != exitFail {
		t.Fatalf("failing post --wait: exit %d, want %d", code, exitFail)
	}
	s, err := natsstore.New(ctx, natsstore.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	envs, err := s.Load(ctx, "m1", 1)
	if err != nil || len(envs) == 0 {
		t.Fatalf("load: %d events, %v", len(envs), err)
	}
	if envs[0].TraceParent != traceparent {
		t.Errorf("the post's traceparent is %q, want TRACEPARENT's %q", envs[0].TraceParent, traceparent)
	}

	testkit.CheckFor(t, 15*time.Second, func() error {
		_, body := httpGet(t, base+"/metrics")
		for series, want := range map[string]string{
			`artifactr_turns_total{outcome="completed"}`: "1",
			`artifactr_turns_total{outcome="failed"}`:    "1",
			`artifactr_claims_total`:                     "1",
			`artifactr_claimed_threads`:                  "1",
			`artifactr_turn_duration_seconds_count`:      "2",
			`artifactr_run_start_latency_seconds_count`:  "2",
		} {
			if got := metricValue(body, series); got != want {
				return fmt.Errorf("%s = %q, want %q", series, got, want)
			}
		}
		// The projector catches up: its lag is read at each scrape.
		if got := metricValue(body, "artifactr_projector_lag_events"); got != "0" {
			return fmt.Errorf("artifactr_projector_lag_events = %q, want 0 once caught up", got)
		}
		return nil
	})
}

// consoleSpan is the part of a console-exported span the test reads.
type consoleSpan struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
}

// spansIn parses the console exporter's spans, one JSON object a line, out
// of a log.
func spansIn(log string) []consoleSpan {
	var out []consoleSpan
	for _, line := range strings.Split(log, "\n") {
		var s consoleSpan
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &s) == nil && s.Name != "" {
			out = append(out, s)
		}
	}
	return out
}

// With the OTEL_* variables set, post's span and the turn's span are one
// trace: the turn span's parent is the post span.
func TestRun_serveTraces(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // ms: export soon, not only at shutdown
	t.Setenv("TRACEPARENT", "")
	t.Setenv(envNATS, "")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut testkit.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--no-sync", "--log-level", "warn", "--claim-ttl", "2s"}, &out, &errOut)
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Errorf("serve did not stop")
		}
	}()
	var url string
	testkit.CheckFor(t, 15*time.Second, func() error {
		m := listenRE.FindStringSubmatch(out.String())
		if m == nil || !strings.Contains(out.String(), " ready on stream ") {
			return fmt.Errorf("serve not ready:\n%s", out.String())
		}
		url = m[1]
		return nil
	})
	if !strings.Contains(out.String(), "tracing on") {
		t.Errorf("serve did not say tracing is on:\n%s", out.String())
	}
	code, _, postErr := runCLI(t, t.Context(), "post", "tt", "hello", "--wait", "--nats", url)
	if code != exitOK {
		t.Fatalf("post: exit %d: %s", code, postErr)
	}
	var post consoleSpan
	for _, s := range spansIn(postErr) {
		if s.Name == "post" {
			post = s
		}
	}
	if post.SpanContext.SpanID == "" {
		t.Fatalf("post exported no post span; stderr:\n%s", postErr)
	}
	testkit.CheckFor(t, 15*time.Second, func() error {
		for _, s := range spansIn(errOut.String()) {
			if s.Name == "turn" {
				if s.Parent.SpanID != post.SpanContext.SpanID || s.SpanContext.TraceID != post.SpanContext.TraceID {
					t.Fatalf("turn span %+v is not a child of the post span %+v", s, post)
				}
				return nil
			}
		}
		return fmt.Errorf("no turn span exported yet; serve stderr:\n%s", errOut.String())
	})
}

// A --metrics address that cannot be listened on is a usage error, named.
func TestRun_serveMetricsBadAddress(t *testing.T) {
	t.Setenv(envNATS, "")
	code, _, errOut := runCLI(t, t.Context(), "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--no-sync", "--metrics", "127.0.0.1:99999")
	if code != exitUsage || !strings.Contains(errOut, "127.0.0.1:99999") {
		t.Errorf("exit %d, stderr %q; want %d naming the address", code, errOut, exitUsage)
	}
}
