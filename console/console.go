// Package console is artifactr's web console: a page served from embedded
// assets (hand-written ES modules, no build step, no third-party code) and
// the read routes it needs beyond the LangGraph Agent Server API that package
// httpapi serves beside it: a paged, live thread list from the summaries, a
// thread's raw timeline with claims and fencing tokens, runner sessions and
// fence refusals, and the audit.
//
// Every write the page makes goes through the same API a client uses: posts,
// answers and cancels through the LangGraph routes, forks and strategies
// through the two /artifactr routes below, which call package client.
//
// Routes (all JSON unless said; errors are {"detail": "..."}):
//
//	GET  /                                  the page; GET /ui/... its assets
//	GET  /artifactr/threads                 ?status=&q=&meta=k=v&sort=&offset=&limit=: {total, seq, threads}
//	GET  /artifactr/threads/live            SSE: "changed" {seq} when any summary changed (at most 4 a second)
//	GET  /artifactr/threads/{id}/events     SSE: one "event" per stored event from ?from= or Last-Event-ID, live
//	GET  /artifactr/threads/{id}/fold       ?at=SEQ: the thread's fold at SEQ (show --at)
//	POST /artifactr/threads/{id}/fork       {"at": SEQ, "thread": NEW}: {thread, seq}
//	POST /artifactr/threads/{id}/configure  {"strategy": S}: {seq}
//	GET  /artifactr/runners                 sessions, threads held, recent takeovers and refusals, projector lag
//	POST /artifactr/audit                   {"thread": T, "spec": bool}: SSE "progress", then "report"
package console

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/projections/summaries"
)

//go:embed assets
var assets embed.FS

// CSP is the page's Content-Security-Policy: scripts and styles from the
// page's own origin only, no inline script, no frames, no plugins.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Config is what the console reads.
type Config struct {
	// Client forks, configures and reads threads. Required.
	Client *client.Client
	// Store reads sessions and replays the stream for the audit. Required.
	Store *natsstore.Store
	// Index is the live thread list. Required; the console starts it on
	// first use, to run until Context ends.
	Index   *summaries.Index
	Context context.Context
	// Summaries is the thread-summaries bucket, for the projector's lag.
	// Default summaries.DefaultBucket.
	Summaries string
	// Recent is this process's recent takeovers and fence refusals; nil
	// shows none.
	Recent *Recent
	// Metrics returns the counters the runners page shows (name to value),
	// nil for none.
	Metrics func() map[string]float64
	// Logger receives warnings. Default discards.
	Logger *slog.Logger
}

// Console serves the page and its routes.
type Console struct {
	cfg Config
	log *slog.Logger
}

// New returns the console of cfg.
func New(cfg Config) *Console {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Context == nil {
		cfg.Context = context.Background()
	}
	if cfg.Summaries == "" {
		cfg.Summaries = summaries.DefaultBucket
	}
	return &Console{cfg: cfg, log: cfg.Logger}
}

// Public reports whether path is one of the page's own assets, which are
// served without a token: the page asks for the token itself.
func Public(path string) bool {
	return path == "/" || strings.HasPrefix(path, "/ui/")
}

// Register adds the console's routes to mux. api registers each /artifactr
// route through the caller's wrapper, which answers a returned error as
// {"detail": ...} with its status: an error with an HTTPStatus() int
// method says its own (see [Error]).
func (c *Console) Register(mux *http.ServeMux, api func(pattern string, h func(http.ResponseWriter, *http.Request) error)) {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embed above guarantees the folder
	}
	files := http.FileServerFS(static)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w)
		http.ServeFileFS(w, r, static, "index.html")
	})
	mux.Handle("GET /ui/", http.StripPrefix("/ui/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w)
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})))
	api("GET /artifactr/threads", c.threads)
	api("GET /artifactr/threads/live", c.threadsLive)
	api("GET /artifactr/threads/{thread_id}/events", c.threadEvents)
	api("GET /artifactr/threads/{thread_id}/fold", c.fold)
	api("POST /artifactr/threads/{thread_id}/fork", c.fork)
	api("POST /artifactr/threads/{thread_id}/configure", c.configure)
	api("GET /artifactr/runners", c.runners)
	api("POST /artifactr/audit", c.audit)
}

// Error is an error the API answers with Status.
type Error struct {
	Status int
	Detail string
}

func (e *Error) Error() string { return e.Detail }

// HTTPStatus is the status the error is answered with.
func (e *Error) HTTPStatus() int { return e.Status }

func errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Detail: fmt.Sprintf(format, args...)}
}

// index returns the thread list, started.
func (c *Console) index() *summaries.Index {
	c.cfg.Index.Start(c.cfg.Context)
	return c.cfg.Index
}

func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}
