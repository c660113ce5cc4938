package httpapi

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/console"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections/summaries"
)

// DefaultMaxBody is the largest request body the API reads: 1 MiB, the
// stream's default event limit, so that no accepted body makes an event
// the stream refuses for its size.
const DefaultMaxBody = 1 << 20

// Role is what a bearer token may do.
type Role string

// The roles, after the NATS roles of the same names.
const (
	RoleClient  Role = "client"  // post and read
	RoleAuditor Role = "auditor" // read only
)

// Config configures a [Server].
type Config struct {
	// Client posts, forks, cancels and reads. Required.
	Client *client.Client
	// Assistants are the configured agents; Default is the graph id of the
	// runner's default agent. At least one is required.
	Assistants []Assistant
	Default    string
	// Summaries is the thread-summaries KV bucket that thread search reads.
	// Default summaries.DefaultBucket.
	Summaries string
	// Tokens maps bearer tokens to roles. Empty: no auth (loopback only;
	// the caller checks).
	Tokens map[string]Role
	// CORSOrigin, when set, is allowed to call the API from a browser
	// ("*" for any).
	CORSOrigin string
	// MaxBody bounds request bodies. Default DefaultMaxBody.
	MaxBody int64
	// Logger receives warnings. Default discards.
	Logger *slog.Logger
	// Console, when set, is served beside the API: its page at / (without
	// a token; the page asks for one) and its /artifactr routes.
	Console *console.Console
	// DelayedBucket is the KV bucket of runs created with after_seconds
	// whose posts are not made yet. Default client.DefaultDelayedBucket.
	DelayedBucket string
	// Now is the clock of delayed runs: when they are created and when
	// they are due. Default time.Now.
	Now func() time.Time
}

// Server serves the LangGraph Agent Server API on top of package client.
// Every write goes through the client: posts, forks, cancels and the
// thread events clients may write; every read is of the log or of the
// thread-summaries read model.
type Server struct {
	cfg Config
	c   *client.Client
	log *slog.Logger
	mux *http.ServeMux

	ctx    context.Context // ends on Close: the follow, the delayed posts' drainer
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{} // a delayed run was stored: the drainer looks again

	hub *hub
}

// New checks cfg and returns the server.
func New(cfg Config) (*Server, error) {
	if cfg.Client == nil {
		return nil, errors.New("httpapi: Config.Client is required")
	}
	if len(cfg.Assistants) == 0 {
		return nil, errors.New("httpapi: no assistants")
	}
	cfg.Default = cmp.Or(cfg.Default, cfg.Assistants[0].GraphID)
	cfg.Summaries = cmp.Or(cfg.Summaries, summaries.DefaultBucket)
	cfg.DelayedBucket = cmp.Or(cfg.DelayedBucket, client.DefaultDelayedBucket)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, c: cfg.Client, log: cfg.Logger, wake: make(chan struct{}, 1)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	// The hub follows from the stream's end now, so that it misses
	// nothing stored after a subscription; a follow that fails (NATS
	// gone) starts again from the end then, with every subscriber gone
	// on alone meanwhile.
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	last, err := s.c.LastSeqs(ctx)
	cancel()
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	s.hub = newHub(cfg.Client.Subjects(), next(last))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			from := s.hub.from()
			s.hub.run(s.ctx, func(ctx context.Context) func(func(events.Envelope, error) bool) {
				return resolving(ctx, s.c, s.c.WatchAll(ctx, from))
			})
			t := time.NewTimer(time.Second)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
			last, err := s.c.LastSeqs(ctx)
			cancel()
			if err == nil {
				s.log.Warn("httpapi: the stream's follow ended; following again", "from", next(last))
				s.hub.restart(next(last))
			}
		}
	}()
	s.wg.Add(1)
	go s.drainDelayed()
	s.routes()
	return s, nil
}

// next returns the sequences after last, one per partition.
func next(last []uint64) []uint64 {
	out := make([]uint64, len(last))
	for p := range last {
		out[p] = last[p] + 1
	}
	return out
}

// Close stops the server's own goroutines (the follow, the delayed posts'
// drainer) and waits for them. It does not close the client.
func (s *Server) Close() {
	s.cancel()
	s.wg.Wait()
}

// routes registers one handler per route.
func (s *Server) routes() {
	m := http.NewServeMux()
	h := func(pattern string, f func(http.ResponseWriter, *http.Request) error) {
		m.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if err := f(w, r); err != nil {
				s.writeError(w, r, err)
			}
		})
	}
	h("GET /ok", func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
		return nil
	})
	h("GET /info", s.info)

	h("POST /assistants/search", s.searchAssistants)
	h("POST /assistants/count", s.countAssistants)
	h("GET /assistants/{assistant_id}", s.getAssistant)
	h("GET /assistants/{assistant_id}/graph", s.assistantGraph)
	h("GET /assistants/{assistant_id}/schemas", s.assistantSchemas)
	h("GET /assistants/{assistant_id}/subgraphs", s.assistantSubgraphs)
	for _, p := range []string{"POST /assistants", "PATCH /assistants/{assistant_id}", "DELETE /assistants/{assistant_id}"} {
		h(p, func(http.ResponseWriter, *http.Request) error {
			return errorf(http.StatusMethodNotAllowed, "assistants are the agents configured with serve --config; they cannot be changed over the API")
		})
	}

	h("POST /threads", s.createThread)
	h("POST /threads/search", s.searchThreads)
	h("POST /threads/count", s.countThreads)
	h("GET /threads/{thread_id}", s.getThread)
	h("PATCH /threads/{thread_id}", s.patchThread)
	h("DELETE /threads/{thread_id}", s.deleteThread)
	h("POST /threads/{thread_id}/copy", s.copyThread)
	h("GET /threads/{thread_id}/state", s.getState)
	h("GET /threads/{thread_id}/state/{checkpoint_id}", s.getStateAt)
	h("POST /threads/{thread_id}/state/checkpoint", s.postStateAt)
	h("POST /threads/{thread_id}/history", s.history)
	h("GET /threads/{thread_id}/history", s.history)

	h("POST /threads/{thread_id}/runs", s.createRun)
	h("POST /threads/{thread_id}/runs/wait", s.waitRun)
	h("POST /threads/{thread_id}/runs/stream", s.streamRun)
	h("GET /threads/{thread_id}/runs", s.listRuns)
	h("GET /threads/{thread_id}/runs/{run_id}", s.getRun)
	h("DELETE /threads/{thread_id}/runs/{run_id}", s.deleteRun)
	h("POST /threads/{thread_id}/runs/{run_id}/cancel", s.cancelRun)
	h("GET /threads/{thread_id}/runs/{run_id}/join", s.joinRun)
	h("GET /threads/{thread_id}/runs/{run_id}/stream", s.joinStream)
	h("POST /runs", s.createRun)
	h("POST /runs/wait", s.waitRun)
	h("POST /runs/stream", s.streamRun)
	if s.cfg.Console != nil {
		s.cfg.Console.Register(m, h)
	}
	h("/", func(_ http.ResponseWriter, r *http.Request) error {
		return errorf(http.StatusNotFound, "no route %s %s", r.Method, r.URL.Path)
	})
	s.mux = m
}

// readOnlyPosts are the POST routes that only read: an auditor may call
// them.
var readOnlyPosts = []string{"/assistants/search", "/assistants/count", "/threads/search", "/threads/count", "/artifactr/audit"}

func readOnly(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	case http.MethodPost:
		p := r.URL.Path
		for _, q := range readOnlyPosts {
			if p == q {
				return true
			}
		}
		return strings.HasPrefix(p, "/threads/") && (strings.HasSuffix(p, "/history") || strings.HasSuffix(p, "/state/checkpoint"))
	}
	return false
}

// ServeHTTP answers CORS preflights, checks the bearer token, bounds the
// body and routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer s.logRecover(w, r)
	if o := s.cfg.CORSOrigin; o != "" {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", o)
		h.Set("Access-Control-Expose-Headers", "Content-Location, Location, X-Pagination-Next, X-Pagination-Total")
		if o != "*" {
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, PATCH, DELETE, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key, Last-Event-ID")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	if len(s.cfg.Tokens) > 0 && !(s.cfg.Console != nil && r.Method == http.MethodGet && console.Public(r.URL.Path)) {
		role, ok := s.role(r)
		switch {
		case !ok:
			w.Header().Set("WWW-Authenticate", `Bearer realm="artifactr"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"detail": "missing or wrong token: send Authorization: Bearer TOKEN (DATA/auth/http-client.token or http-auditor.token)"})
			return
		case role != RoleClient && !readOnly(r):
			writeJSON(w, http.StatusForbidden, map[string]string{"detail": fmt.Sprintf("the %s token may only read", role)})
			return
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
	s.mux.ServeHTTP(w, r)
}

// role returns the role of r's token: Authorization: Bearer, or x-api-key,
// which the LangGraph SDKs send for their apiKey option.
func (s *Server) role(r *http.Request) (Role, bool) {
	tok := r.Header.Get("X-Api-Key")
	if a := r.Header.Get("Authorization"); a != "" {
		scheme, rest, ok := strings.Cut(a, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "", false
		}
		tok = strings.TrimSpace(rest)
	}
	if tok == "" {
		return "", false
	}
	for t, role := range s.cfg.Tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(tok)) == 1 {
			return role, true
		}
	}
	return "", false
}

func (s *Server) info(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{
		"version": "artifactr",
		"flags":   map[string]bool{"assistants": true, "crons": false, "langsmith": false},
	})
	return nil
}

// resolving yields seq's envelopes with each fork by reference resolved
// (client.ResolveFork), before the hub takes its lock: the hub's folds of
// forked threads hold their history, as folds of loaded threads do.
func resolving(ctx context.Context, c *client.Client, seq iter.Seq2[events.Envelope, error]) iter.Seq2[events.Envelope, error] {
	return func(yield func(events.Envelope, error) bool) {
		for env, err := range seq {
			if err == nil {
				err = c.ResolveFork(ctx, &env)
			}
			if !yield(env, err) || err != nil {
				return
			}
		}
	}
}
