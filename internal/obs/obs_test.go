package obs_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"go.uber.org/goleak"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/obs"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
)

// obs does not import the runner, so the check that its Observer fits the
// runner's hooks is here, where the two meet.
var (
	_ runner.Observer         = (*obs.Observer)(nil)
	_ runner.SnapshotObserver = (*obs.Observer)(nil)
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// scraper serves reg like serve --metrics does and reads it back.
type scraper struct {
	t   *testing.T
	srv *httptest.Server
}

func newScraper(t *testing.T, reg *prometheus.Registry, ready func(context.Context) error) *scraper {
	if ready == nil {
		ready = func(context.Context) error { return nil }
	}
	srv := httptest.NewServer(obs.Handler(reg, ready))
	t.Cleanup(srv.Close)
	return &scraper{t: t, srv: srv}
}

func (s *scraper) get(path string) (int, string) {
	s.t.Helper()
	resp, err := http.Get(s.srv.URL + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// scrape reads /metrics as families by name.
func (s *scraper) scrape() metrics {
	s.t.Helper()
	code, body := s.get("/metrics")
	if code != http.StatusOK {
		s.t.Fatalf("/metrics: %d %s", code, body)
	}
	fams, err := new(expfmt.TextParser).TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		s.t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

type metrics map[string]*dto.MetricFamily

// get returns a counter's or gauge's value, or a histogram's sample count,
// for the series with the given label pairs; -1 when there is none.
func (m metrics) get(name string, labels ...string) float64 {
	f := m[name]
	if f == nil {
		return -1
	}
next:
	for _, mt := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range mt.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case mt.Counter != nil:
			return mt.Counter.GetValue()
		case mt.Gauge != nil:
			return mt.Gauge.GetValue()
		case mt.Histogram != nil:
			return float64(mt.Histogram.GetSampleCount())
		case mt.Untyped != nil:
			return mt.Untyped.GetValue()
		}
	}
	return -1
}

func startRunner(t *testing.T, cfg runner.Config) *runner.Runner {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	r, err := runner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}

func post(t *testing.T, s events.Poster, th, text string, opts ...events.PostOption) uint64 {
	t.Helper()
	ack, err := s.Post(context.Background(), th, &eventspb.MessagePosted{Text: text, Author: "test"}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Seq
}

func fold(t *testing.T, s events.Reader, th string) *projections.Thread {
	t.Helper()
	envs, err := s.Load(context.Background(), th, 1)
	if err != nil {
		t.Fatal(err)
	}
	return projections.Fold(th, envs)
}

// settled: every message of th consumed and no run active.
func settled(t *testing.T, s events.Reader, th string) func() error {
	return func() error {
		v := fold(t, s, th)
		if n := len(v.Pending()); n > 0 || v.ActiveRun != nil {
			return fmt.Errorf("%s: %d pending, active run %v", th, n, v.ActiveRun != nil)
		}
		return nil
	}
}

func waitFor(t *testing.T, what string, f func() error) {
	t.Helper()
	testkit.CheckFor(t, 30*time.Second, func() error {
		if err := f(); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		return nil
	})
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
