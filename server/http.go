package server

import (
	"context"
	"iter"
	"time"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/console"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/httpapi"
	"github.com/artifactr/artifactr/projections/summaries"
)

// HTTPConfig configures the HTTP API (the LangGraph Agent Server API) and
// the console it serves at /.
type HTTPConfig struct {
	// Addr is the listener's address (host:port; port 0: any free port).
	// Empty: no HTTP API.
	Addr string
	// Client is how the API's own client connects: a client of its own
	// beside the runner's store, with the client's permissions.
	Client client.Config
	// Assistants are the graph ids the API offers. Default: one, named
	// after the runner's agent.
	Assistants []httpapi.Assistant
	// Default is the assistant of a run that names none. Default: the
	// runner's agent's name.
	Default string
	// CORSOrigin, when set, is allowed to call the API from a browser.
	CORSOrigin string
	// Tokens maps bearer tokens to roles; empty: no auth, for loopback
	// only (the caller checks).
	Tokens map[string]httpapi.Role
	// CertFile and KeyFile, when set, serve HTTPS.
	CertFile, KeyFile string
}

// front is the running HTTP API: its listener, its client, and the
// webhooks' follower.
type front struct {
	l     *httpapi.Listening
	close func()
}

// startHTTP dials the API's client, builds the console and the API, listens,
// and follows the log for webhooks.
func startHTTP(ctx context.Context, cfg *Config, recent *console.Recent, metrics func() map[string]float64) (*front, error) {
	h := &cfg.HTTP
	name := "echo"
	if cfg.Runner.Agent != nil {
		name = cfg.Runner.Agent.Name()
	}
	assistants, def := h.Assistants, h.Default
	if assistants == nil {
		assistants = []httpapi.Assistant{{GraphID: name, Kind: name}}
	}
	if def == "" {
		def = name
	}
	ccfg := h.Client
	if ccfg.Logger == nil {
		ccfg.Logger = cfg.Logger
	}
	c, err := client.Dial(ctx, ccfg)
	if err != nil {
		return nil, err
	}
	ictx, stopIndex := context.WithCancel(context.WithoutCancel(ctx))
	closeAll := func() { stopIndex(); c.Close() }
	index := summaries.NewIndex(cfg.Store, cfg.Summaries, func(ctx context.Context, from []uint64) iter.Seq2[events.Envelope, error] {
		return c.WatchAll(ctx, from)
	})
	con := console.New(console.Config{Client: c, Store: cfg.Store, Index: index, Context: ictx, Summaries: cfg.Summaries,
		Recent: recent, Metrics: metrics, Logger: cfg.Logger})
	api, err := httpapi.New(httpapi.Config{Client: c, Assistants: assistants, Default: def, Summaries: cfg.Summaries,
		CORSOrigin: h.CORSOrigin, Logger: cfg.Logger, Console: con, Tokens: h.Tokens})
	if err != nil {
		closeAll()
		return nil, err
	}
	l, err := httpapi.Listen(api, h.Addr, h.CertFile, h.KeyFile)
	if err != nil {
		closeAll()
		return nil, err
	}
	// Webhooks follow the log through a durable consumer of the runner's
	// store (the runner's role may acknowledge it; a client's may not).
	wctx, stopWebhooks := context.WithCancel(context.WithoutCancel(ctx))
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		if err := api.RunWebhooks(wctx, cfg.Store); err != nil {
			cfg.Logger.Warn("webhooks stopped", "err", err)
		}
	}()
	return &front{l: l, close: func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = l.Close(sctx)
		stopWebhooks()
		<-wdone
		closeAll()
	}}, nil
}
