package obs_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	agentexec "github.com/artifactr/artifactr/actors/agent/exec"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/internal/obs"
	"github.com/artifactr/artifactr/internal/testkit"
)

// /healthz answers while the process lives; /readyz only while ready says
// so, with the reason otherwise.
func TestHandler_healthAndReadiness(t *testing.T) {
	var ready atomic.Bool
	s := newScraper(t, prometheus.NewRegistry(), func(context.Context) error {
		if !ready.Load() {
			return errors.New("runner not started")
		}
		return nil
	})
	if code, _ := s.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	if code, body := s.get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "runner not started") {
		t.Errorf("/readyz before ready: %d %q", code, body)
	}
	ready.Store(true)
	if code, body := s.get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz when ready: %d %q", code, body)
	}
}

// The projector's lag is read at scrape time; an unreadable lag leaves the
// gauge out rather than showing a stale or made-up value.
func TestRegisterProjectorLag(t *testing.T) {
	reg := prometheus.NewRegistry()
	var lag atomic.Int64
	lag.Store(7)
	if err := obs.RegisterProjectorLag(reg, func(context.Context) (uint64, error) {
		if n := lag.Load(); n >= 0 {
			return uint64(n), nil
		}
		return 0, errors.New("no read model")
	}, testLogger()); err != nil {
		t.Fatal(err)
	}
	s := newScraper(t, reg, nil)
	if got := s.scrape().get("artifactr_projector_lag_events"); got != 7 {
		t.Errorf("lag %v, want 7", got)
	}
	lag.Store(-1)
	if got := s.scrape().get("artifactr_projector_lag_events"); got != -1 {
		t.Errorf("lag %v while unreadable, want the gauge left out", got)
	}
}

func TestObserver_LeaseRenewed(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := obs.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	o := obs.New(obs.Config{Metrics: m})
	o.LeaseRenewed(nil)
	o.LeaseRenewed(events.ErrLeaseLost)
	got := newScraper(t, reg, nil).scrape()
	if got.get("artifactr_lease_renewals_total") != 2 || got.get("artifactr_lease_renewal_failures_total") != 1 {
		t.Errorf("renewals %v failures %v, want 2 and 1", got.get("artifactr_lease_renewals_total"), got.get("artifactr_lease_renewal_failures_total"))
	}
}

func TestTracingEnabled(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
	} {
		if got := obs.TracingEnabled(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("env %v: enabled %v, want %v", c.env, got, c.want)
		}
	}
}

// OTEL_TRACES_EXPORTER=console writes each span as JSON; with no OTEL_*
// variable there is no provider at all.
func TestTracerProviderFromEnv(t *testing.T) {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME"} {
		t.Setenv(k, "")
	}
	tp, stop, err := obs.TracerProviderFromEnv(t.Context(), "artifactr-test", nil)
	if err != nil || tp != nil {
		t.Fatalf("no OTEL_* set: provider %v, err %v; want none", tp, err)
	}
	_ = stop(t.Context())

	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	var buf bytes.Buffer
	tp, stop, err = obs.TracerProviderFromEnv(t.Context(), "artifactr-test", &buf)
	if err != nil || tp == nil {
		t.Fatalf("console: provider %v, err %v", tp, err)
	}
	_, span := obs.StartPost(t.Context(), tp, "t1")
	span.End()
	if err := stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, `"Name":"post"`) || !strings.Contains(out, "from-env") {
		t.Errorf("console exporter wrote:\n%s", out)
	}

	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	if _, _, err := obs.TracerProviderFromEnv(t.Context(), "artifactr-test", nil); err == nil || !strings.Contains(err.Error(), "zipkin") {
		t.Errorf("unsupported exporter: err %v", err)
	}
}

// A bad trace context is refused at the post, not stored.
func TestWithTraceContext_malformed(t *testing.T) {
	s := memstore.New(memstore.Config{})
	for _, tp := range []string{"garbage", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
		if _, err := s.Post(t.Context(), "x", nil, events.WithTraceContext(tp, "")); !errors.Is(err, events.ErrInvalidEvent) {
			t.Errorf("traceparent %q: err %v, want ErrInvalidEvent", tp, err)
		}
	}
}

// logBuffer is a slog handler's output that tests can read while runs log.
func logBuffer(level slog.Level) (*slog.Logger, *testkit.SyncBuffer) {
	var b testkit.SyncBuffer
	return slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: level})), &b
}

// Each run's end is one info line; an exec agent's stderr is logged at debug
// after a run that completed and at warn after one that failed.
func TestObserver_runLogs(t *testing.T) {
	log, buf := logBuffer(slog.LevelDebug)
	s := memstore.New(memstore.Config{})
	script := `read -r turn; echo "stderr of $$" >&2; case "$turn" in *'"text":"bad"'*) exit 3;; esac; echo '{"type":"done","output":"ok"}'`
	r := startRunner(t, runner.Config{
		Store: s, Agent: agentexec.Agent{Path: "/bin/sh", Args: []string{"-c", script}, Timeout: 20 * time.Second},
		Observer: obs.New(obs.Config{Logger: log}), Logger: testLogger(),
	})
	defer r.Stop(context.Background())
	post(t, s, "lg", "good")
	post(t, s, "lg", "bad")
	waitFor(t, "both runs", settled(t, s, "lg"))
	waitFor(t, "both run-end lines", func() error {
		if n := strings.Count(buf.String(), `msg="run ended"`); n != 2 {
			return errorf("%d run-end lines:\n%s", n, buf.String())
		}
		return nil
	})
	v := fold(t, s, "lg")
	lines := strings.Split(buf.String(), "\n")
	find := func(msg, run string) string {
		for _, l := range lines {
			if strings.Contains(l, `msg="`+msg+`"`) && strings.Contains(l, "run="+run) {
				return l
			}
		}
		return ""
	}
	good, bad := v.Runs[0].ID, v.Runs[1].ID
	for _, c := range []struct{ msg, run, want string }{
		{"run ended", good, "level=INFO"},
		{"run ended", good, "outcome=completed"},
		{"run ended", good, "thread=lg"},
		{"run ended", good, "duration="},
		{"run ended", bad, "outcome=failed"},
		{"agent stderr", good, "level=DEBUG"},
		{"agent stderr", good, "stderr of "},
		{"agent stderr of a failed run", bad, "level=WARN"},
		{"agent stderr of a failed run", bad, "stderr of "},
	} {
		if l := find(c.msg, c.run); !strings.Contains(l, c.want) {
			t.Errorf("%q line of %s lacks %q: %q", c.msg, c.run, c.want, l)
		}
	}
}

// TestObserver_Appending_errorCodeLabel: an append error is labelled by the
// store's code when Config.ErrorCode finds one, else by its class; without
// ErrorCode, always by class.
func TestObserver_Appending_errorCodeLabel(t *testing.T) {
	coded := errors.New("coded")
	code := func(err error) (int, bool) {
		if errors.Is(err, coded) {
			return 10071, true
		}
		return 0, false
	}
	for _, c := range []struct {
		name      string
		errorCode func(error) (int, bool)
		err       error
		want      string
	}{
		{"code", code, coded, "10071"},
		{"no code: class", code, events.ErrThreadBusy, "thread_busy"},
		{"no ErrorCode: class", nil, coded, "unknown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := obs.NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			o := obs.New(obs.Config{Metrics: m, ErrorCode: c.errorCode})
			ev := &eventspb.Event{Thread: "t", Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{Text: "x"}}}
			o.Appending(events.Claim{Thread: "t", Seq: 1}, ev, nil)(events.Ack{}, c.err)
			if got := newScraper(t, reg, nil).scrape().get("artifactr_append_errors_total", "code", c.want); got != 1 {
				t.Errorf("append_errors_total{code=%q} = %v, want 1", c.want, got)
			}
		})
	}
}
