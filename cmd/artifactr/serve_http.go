package main

import (
	"context"
	"fmt"
	"iter"
	"net"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/console"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/httpapi"
	"github.com/artifactr/artifactr/internal/natsauth"
	"github.com/artifactr/artifactr/projections/summaries"
)

// httpFlags are serve's HTTP API flags.
type httpFlags struct {
	addr   string // "" when off
	config string
	cors   string
	// file is the --config file, read by withConfig.
	file *httpapi.File
}

func addHTTPFlags(cmd *cobra.Command, h *httpFlags) {
	fl := cmd.Flags()
	fl.StringVar(&h.addr, "http", "", "serve the LangGraph Agent Server API on this address, as "+httpapi.DefaultAddr+" (a bare PORT or :PORT is on 127.0.0.1; port 0: any free port); off when empty. Not loopback needs --auth")
	fl.StringVar(&h.config, "config", "", "assistants file (JSON, like langgraph.json): graph ids and the agent each runs; see httpapi/README.md")
	fl.StringVar(&h.cors, "http-cors-origin", "", "allow browser calls to the HTTP API from this origin (\"*\": any)")
}

// withConfig checks the HTTP flags before anything is opened or written,
// and with --config returns the router of its agents in place of ag.
func (f *serveFlags) withConfig(ag agent.Agent, cmd *cobra.Command) (agent.Agent, error) {
	h := &f.http
	h.addr = httpapi.NormalizeAddr(h.addr)
	switch {
	case h.addr == "" && (h.cors != "" || cmd.Flags().Changed("http-cors-origin")):
		return nil, usagef("--http-cors-origin needs --http")
	case h.addr != "" && !httpapi.IsLoopback(h.addr) && !f.auth:
		return nil, usagef("--http %s is not loopback: anyone who reaches it could post and read every thread; add --auth (bearer tokens in DATA/auth) or listen on 127.0.0.1", h.addr)
	}
	if h.addr != "" {
		// Taken is found now, before the data directory is opened.
		ln, err := net.Listen("tcp", h.addr)
		if err != nil {
			return nil, failf("--http %s: %v", h.addr, err)
		}
		ln.Close()
	}
	if h.config == "" {
		return ag, nil
	}
	if cmd.Flags().Changed("agent") || cmd.ArgsLenAtDash() >= 0 {
		return nil, usagef("--config names the agents; drop --agent and the program after --")
	}
	file, err := httpapi.LoadFile(h.config)
	if err != nil {
		return nil, usage(err)
	}
	agents, err := file.Agents()
	if err != nil {
		return nil, usage(err)
	}
	h.file = file
	r, err := agent.NewAssistants(file.Default, agents)
	if err != nil {
		return nil, usage(err)
	}
	return r, nil
}

// consoleDeps is what the console reads beside the client: the runner's
// store (sessions, the audit's replay), its refusals and its counters.
type consoleDeps struct {
	store   *natsstore.Store
	recent  *console.Recent
	metrics func() map[string]float64
}

// startHTTP starts the HTTP API, with the console at /, if --http is set;
// stop closes it.
func (a *app) startHTTP(ctx context.Context, f *serveFlags, ag agent.Agent, cd consoleDeps) (stop func(), err error) {
	h := &f.http
	if h.addr == "" {
		return func() {}, nil
	}
	assistants := []httpapi.Assistant{{GraphID: ag.Name(), Kind: ag.Name()}}
	def := ag.Name()
	if h.file != nil {
		assistants, def = h.file.Assistants(), h.file.Default
	}
	ccfg := client.Config{URL: f.conn.url, Stream: f.conn.stream, Timeout: f.conn.timeout, Logger: a.log,
		NKeyFile: f.conn.nkey, CredsFile: f.conn.creds}
	if f.conn.inProcess != nil {
		ccfg.NATSOptions, err = f.conn.natsOptions()
		if err != nil {
			return nil, err
		}
		ccfg.NKeyFile, ccfg.CredsFile = "", ""
		if f.auth {
			dir, _ := filepath.Abs(f.data)
			ccfg.NKeyFile = filepath.Join(dir, "auth", natsauth.SeedFile(natsauth.Client))
			ccfg.NATSOptions = ccfg.NATSOptions[:1] // the in-process option only; the client logs in as client
		}
	} else {
		ccfg.TLSCA, ccfg.TLSCert, ccfg.TLSKey = f.conn.tlsCA, f.conn.tlsCert, f.conn.tlsKey
	}
	c, err := client.Dial(ctx, ccfg)
	if err != nil {
		return nil, fail(err)
	}
	ictx, stopIndex := context.WithCancel(context.WithoutCancel(ctx))
	closeAll := func() { stopIndex(); c.Close() }
	index := summaries.NewIndex(cd.store, f.summaries, func(ctx context.Context, from uint64) iter.Seq2[events.Envelope, error] {
		return c.Watch(ctx, "", from)
	})
	con := console.New(console.Config{Client: c, Store: cd.store, Index: index, Context: ictx, Summaries: f.summaries,
		Recent: cd.recent, Metrics: cd.metrics, Logger: a.log})
	cfg := httpapi.Config{Client: c, Assistants: assistants, Default: def, Summaries: f.summaries, CORSOrigin: h.cors, Logger: a.log, Console: con}
	if f.auth {
		dir, _ := filepath.Abs(f.data)
		if cfg.Tokens, err = httpapi.LoadOrCreateTokens(filepath.Join(dir, "auth")); err != nil {
			closeAll()
			return nil, fail(err)
		}
	}
	api, err := httpapi.New(cfg)
	if err != nil {
		closeAll()
		return nil, fail(err)
	}
	cert, key := "", ""
	if f.conn.inProcess != nil {
		cert, key = f.conn.tlsCert, f.conn.tlsKey
	}
	l, err := httpapi.Listen(api, h.addr, cert, key)
	if err != nil {
		closeAll()
		return nil, fail(err)
	}
	// Webhooks follow the log through a durable consumer of serve's own
	// store (the runner's role may acknowledge it; a client's may not).
	wctx, stopWebhooks := context.WithCancel(context.WithoutCancel(ctx))
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		if err := api.RunWebhooks(wctx, cd.store); err != nil {
			a.log.Warn("webhooks stopped", "err", err)
		}
	}()
	fmt.Fprintf(a.stdout, "artifactr serve: HTTP API listening on %s\n", l.URL)
	fmt.Fprintf(a.stdout, "artifactr serve: console on %s/\n", l.URL)
	if f.auth {
		dir, _ := filepath.Abs(f.data)
		fmt.Fprintf(a.stdout, "artifactr serve: HTTP API tokens (Authorization: Bearer): %s, %s\n",
			filepath.Join(dir, "auth", httpapi.ClientTokenFile), filepath.Join(dir, "auth", httpapi.AuditorTokenFile))
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = l.Close(sctx)
		stopWebhooks()
		<-wdone
		closeAll()
	}, nil
}
