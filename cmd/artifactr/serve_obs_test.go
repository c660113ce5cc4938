package main

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"artifactr/events/natsstore"
	"artifactr/internal/testkit"
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
