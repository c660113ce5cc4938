package main

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/httpapi"
	"github.com/artifactr/artifactr/internal/natsauth"
	"github.com/artifactr/artifactr/server"
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

// httpConfig is the server's HTTP API config from the flags: off without
// --http. The API's client logs in as a client; its tokens are read (or
// made) in DATA/auth with --auth.
func (f *serveFlags) httpConfig(log *slog.Logger) (server.HTTPConfig, error) {
	h := &f.http
	if h.addr == "" {
		return server.HTTPConfig{}, nil
	}
	hc := server.HTTPConfig{Addr: h.addr, CORSOrigin: h.cors}
	if h.file != nil {
		hc.Assistants, hc.Default = h.file.Assistants(), h.file.Default
	}
	ccfg := client.Config{URL: f.conn.url, Stream: f.conn.stream, Partitions: f.conn.partitions, Timeout: f.conn.timeout, Logger: log,
		NKeyFile: f.conn.nkey, CredsFile: f.conn.creds}
	if f.conn.inProcess != nil {
		var err error
		ccfg.NATSOptions, err = f.conn.natsOptions()
		if err != nil {
			return hc, err
		}
		ccfg.NKeyFile, ccfg.CredsFile = "", ""
		if f.auth {
			dir, _ := filepath.Abs(f.data)
			ccfg.NKeyFile = filepath.Join(dir, "auth", natsauth.SeedFile(natsauth.Client))
			ccfg.NATSOptions = ccfg.NATSOptions[:1] // the in-process option only; the client logs in as client
		}
		hc.CertFile, hc.KeyFile = f.conn.tlsCert, f.conn.tlsKey
	} else {
		ccfg.TLSCA, ccfg.TLSCert, ccfg.TLSKey = f.conn.tlsCA, f.conn.tlsCert, f.conn.tlsKey
	}
	hc.Client = ccfg
	if f.auth {
		dir, _ := filepath.Abs(f.data)
		var err error
		if hc.Tokens, err = httpapi.LoadOrCreateTokens(filepath.Join(dir, "auth")); err != nil {
			return hc, fail(err)
		}
	}
	return hc, nil
}

// printHTTP says where the HTTP API and the console listen, and with
// --auth where their tokens are.
func (a *app) printHTTP(f *serveFlags, url string) {
	fmt.Fprintf(a.stdout, "artifactr serve: HTTP API listening on %s\n", url)
	fmt.Fprintf(a.stdout, "artifactr serve: console on %s/\n", url)
	if f.auth {
		dir, _ := filepath.Abs(f.data)
		fmt.Fprintf(a.stdout, "artifactr serve: HTTP API tokens (Authorization: Bearer): %s, %s\n",
			filepath.Join(dir, "auth", httpapi.ClientTokenFile), filepath.Join(dir, "auth", httpapi.AuditorTokenFile))
	}
}
