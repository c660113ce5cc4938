package obs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyTimeout bounds one readiness check.
const readyTimeout = 2 * time.Second

// Handler serves /metrics from g, /healthz (the process answers) and
// /readyz: 200 when ready returns nil, else 503 with its error.
func Handler(g prometheus.Gatherer, ready func(context.Context) error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := ready(ctx); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// Server is a running metrics endpoint.
type Server struct {
	srv  *http.Server
	addr string
	done chan struct{}
}

// Listen serves h on addr (host:port; port 0 picks a free one) until Close.
func Listen(addr string, h http.Handler, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("obs: listen on %s: %w", addr, err)
	}
	s := &Server{
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		addr: ln.Addr().String(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics endpoint stopped", "addr", s.addr, "err", err)
		}
	}()
	return s, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() string { return s.addr }

// Close stops the server and waits for it.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}

// LagFunc reads how many events the projector is behind the stream.
type LagFunc func(ctx context.Context) (uint64, error)

// lagCollector reads the projector's lag at each scrape, bounded by a
// timeout; a failed read leaves the gauge out of that scrape.
type lagCollector struct {
	desc *prometheus.Desc
	read LagFunc
	log  *slog.Logger
}

// RegisterProjectorLag registers artifactr_projector_lag_events, read at
// each scrape with read.
func RegisterProjectorLag(reg prometheus.Registerer, read LagFunc, log *slog.Logger) error {
	c := &lagCollector{
		desc: prometheus.NewDesc("artifactr_projector_lag_events",
			"Events in the stream not yet applied to the thread-summaries read model (stream last sequence minus its checkpoint), read at scrape time.", nil, nil),
		read: read, log: log,
	}
	if err := reg.Register(c); err != nil {
		return fmt.Errorf("obs: register projector lag: %w", err)
	}
	return nil
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	n, err := c.read(ctx)
	if err != nil {
		c.log.Debug("projector lag unreadable", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n))
}
