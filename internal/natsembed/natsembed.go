// Package natsembed runs nats-server with JetStream inside this process.
//
// artifactr serve embeds one server on loopback (DESIGN §7); tests start
// theirs through package natsembedtest (one per test, a leaf node, or a
// small cluster), which is kept apart so it never reaches the binary.
//
// The defaults are durable: JetStream fsyncs every write. [Config.NoSync]
// trades that for speed and says so in the log.
//
// One server per data directory: [Start] holds an exclusive flock on
// [LockFile] in it until [Server.Shutdown] or the process's death, and
// checks the listen addresses before it opens the store, so a second server
// fails with [ErrDataDirLocked] or [ErrListenInUse] and touches nothing.
//
// # Usage
//
//	srv, err := natsembed.Start(natsembed.Config{DataDir: dir, Logger: log})
//	if err != nil {
//		return err
//	}
//	defer srv.Shutdown()
//	nc, err := nats.Connect(srv.ClientURL())
package natsembed

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// DefaultListen is the client address used when Config.Listen is empty.
const DefaultListen = "127.0.0.1:4222"

// DefaultMaxPayload is the largest message the server accepts by default:
// 8 MiB, so that events of up to events.DefaultMaxEventBytes (1 MiB) and
// their headers fit with room to spare.
const DefaultMaxPayload = 8 << 20

// DefaultReadyTimeout bounds how long Start waits for the server to listen.
const DefaultReadyTimeout = 10 * time.Second

// Config configures an embedded server. The zero value, with DataDir set, is
// a durable single server on DefaultListen.
type Config struct {
	// DataDir is where JetStream keeps its files. Required.
	DataDir string
	// Listen is the client address, host:port. Port -1 picks a free port;
	// read it back with [Server.ClientURL]. Default DefaultListen.
	Listen string
	// NoSync turns off fsync on every write. Faster, but an acknowledged
	// write can be lost on power failure. Start logs a warning when set.
	NoSync bool
	// MaxPayload is the largest message, in bytes. Default DefaultMaxPayload.
	MaxPayload int32
	// MaxStore is JetStream's file storage limit in bytes (the server's
	// max_file_store). 0 lets the server take 75% of the disk's free space
	// when it starts, a limit that moves with the disk: set one, with
	// headroom, to make a full store a predictable state.
	MaxStore int64
	// Logger receives the server's log. Nil discards it (start-up failures
	// are still returned by Start).
	Logger *slog.Logger
	// ServerName names the server; required to be unique within a cluster.
	ServerName string
	// ReadyTimeout bounds the wait for the server to listen. Default
	// DefaultReadyTimeout.
	ReadyTimeout time.Duration

	// AuthConf is nats-server configuration text defining the users (and
	// accounts) clients must log in as (natsauth renders it); "" lets anyone in.
	AuthConf string
	// TLS serves clients over TLS when set.
	TLS TLSFiles

	// JetStreamDomain puts the server's JetStream in a domain: clients
	// reach it as $JS.<domain>.API (natsstore's Config.Domain), the way a
	// leaf node's JetStream is reached from its hub. "" is no domain.
	JetStreamDomain string
	// LeafListen accepts leaf-node connections on host:port. "" accepts
	// none.
	LeafListen string
	// LeafRemotes are the leaf-node URLs (nats-leaf://host:port) of hubs
	// this server connects to as a leaf node.
	LeafRemotes []string

	// ClusterName, ClusterListen and Routes join the server to a cluster.
	// All three are set together, or none. Routes lists every member's
	// cluster address as host:port (including this server's own is fine).
	ClusterName   string
	ClusterListen string
	Routes        []string
}

func (c *Config) setDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = DefaultMaxPayload
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

func (c *Config) validate() error {
	if c.DataDir == "" {
		return errors.New("natsembed: Config.DataDir is required")
	}
	if c.MaxPayload < 0 {
		return fmt.Errorf("natsembed: Config.MaxPayload %d is negative", c.MaxPayload)
	}
	if c.ReadyTimeout < 0 {
		return fmt.Errorf("natsembed: Config.ReadyTimeout %s is negative", c.ReadyTimeout)
	}
	if err := c.TLS.validate(); err != nil {
		return err
	}
	clustered := c.ClusterName != "" || c.ClusterListen != "" || len(c.Routes) > 0
	if clustered && (c.ClusterName == "" || c.ClusterListen == "" || c.ServerName == "") {
		return errors.New("natsembed: a cluster member needs ClusterName, ClusterListen and ServerName")
	}
	return nil
}

// Server is a running embedded nats-server.
type Server struct {
	ns       *server.Server
	cfg      Config
	lock     *dirLock
	unlocked sync.Once
}

// Start runs a nats-server with JetStream in cfg.DataDir and waits, for at
// most cfg.ReadyTimeout, until it accepts clients. On failure nothing keeps
// running.
//
// Before the server touches the store, Start takes an exclusive lock on the
// data directory (its [LockFile]), held until Shutdown or the process's
// death, and checks that the listen addresses are free. A second server on
// the same directory fails with [ErrDataDirLocked], one on a taken address
// with [ErrListenInUse]; neither opens anything.
func Start(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts, err := cfg.serverOptions()
	if err != nil {
		return nil, err
	}
	// The lock comes first, before the server reads or writes the store:
	// two servers on one directory lose acknowledged writes.
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if err := checkListens(opts); err != nil {
		lock.release()
		return nil, err
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		lock.release()
		return nil, fmt.Errorf("natsembed: configure nats-server: %w", err)
	}
	log := newLogAdapter(cfg.Logger)
	ns.SetLoggerV2(log, false, false, false)
	if cfg.NoSync {
		cfg.Logger.Warn("natsembed: NoSync is set: JetStream writes are not fsynced; an acknowledged write can be lost on power failure",
			"data_dir", cfg.DataDir)
	}
	// Start blocks while JetStream recovers its files; run it aside so the
	// wait below stays bounded and can see fatal errors.
	go ns.Start()
	if err := waitReady(ns, log, cfg); err != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
		lock.release()
		return nil, err
	}
	return &Server{ns: ns, cfg: cfg, lock: lock}, nil
}

// checkListens checks the client and cluster addresses before anything is
// opened, so that a second server fails at once with a clear error.
func checkListens(opts *server.Options) error {
	if err := checkListen("client", opts.Host, opts.Port); err != nil {
		return err
	}
	if opts.Cluster.Name != "" {
		return checkListen("cluster", opts.Cluster.Host, opts.Cluster.Port)
	}
	return nil
}

// waitReady polls the server until it listens (with JetStream on) or logs a
// fatal error, within cfg.ReadyTimeout.
func waitReady(ns *server.Server, log *logAdapter, cfg Config) error {
	deadline := time.Now().Add(cfg.ReadyTimeout)
	for {
		select {
		case msg := <-log.fatal:
			return startError(cfg, msg)
		default:
		}
		if ns.ReadyForConnections(50*time.Millisecond) && ns.JetStreamEnabled() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("natsembed: nats-server on %s not ready after %s (data dir %s)", cfg.Listen, cfg.ReadyTimeout, cfg.DataDir)
		}
	}
}

func startError(cfg Config, msg string) error {
	if msg == "" {
		msg = "unknown fatal error"
	}
	return fmt.Errorf("natsembed: nats-server failed to start (listen %s, cluster %q, data dir %s): %s",
		cfg.Listen, cfg.ClusterListen, cfg.DataDir, msg)
}

func (c *Config) serverOptions() (*server.Options, error) {
	host, port, err := splitHostPort(c.Listen)
	if err != nil {
		return nil, fmt.Errorf("natsembed: Config.Listen: %w", err)
	}
	opts := &server.Options{
		ServerName:        c.ServerName,
		Host:              host,
		Port:              port,
		JetStream:         true,
		StoreDir:          c.DataDir,
		SyncAlways:        !c.NoSync,
		MaxPayload:        c.MaxPayload,
		JetStreamMaxStore: c.MaxStore,
		// The embedding process owns signals; the server must not exit it.
		NoSigs: true,
	}
	if err := c.applySecurity(opts); err != nil {
		return nil, err
	}
	if err := c.applyLeaf(opts); err != nil {
		return nil, err
	}
	if c.ClusterName == "" {
		return opts, nil
	}
	chost, cport, err := splitHostPort(c.ClusterListen)
	if err != nil {
		return nil, fmt.Errorf("natsembed: Config.ClusterListen: %w", err)
	}
	// The pool size is set, not defaulted, so that WaitForRoutes knows how
	// many route connections a formed cluster has.
	opts.Cluster = server.ClusterOpts{Name: c.ClusterName, Host: chost, Port: cport, PoolSize: RoutePoolSize}
	for _, r := range c.Routes {
		u, err := url.Parse("nats-route://" + r)
		if err != nil {
			return nil, fmt.Errorf("natsembed: Config.Routes: %q: %w", r, err)
		}
		opts.Routes = append(opts.Routes, u)
	}
	return opts, nil
}

// applyLeaf sets the JetStream domain and the leaf-node listener and
// remotes.
func (c *Config) applyLeaf(opts *server.Options) error {
	opts.JetStreamDomain = c.JetStreamDomain
	if c.LeafListen != "" {
		host, port, err := splitHostPort(c.LeafListen)
		if err != nil {
			return fmt.Errorf("natsembed: Config.LeafListen: %w", err)
		}
		opts.LeafNode.Host, opts.LeafNode.Port = host, port
	}
	for _, r := range c.LeafRemotes {
		u, err := url.Parse(r)
		if err != nil {
			return fmt.Errorf("natsembed: Config.LeafRemotes: %q: %w", r, err)
		}
		opts.LeafNode.Remotes = append(opts.LeafNode.Remotes, &server.RemoteLeafOpts{URLs: []*url.URL{u}})
	}
	return nil
}

func splitHostPort(hp string) (string, int, error) {
	host, ps, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q (want 0-65535, or -1 for a free port)", hp)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	return host, port, nil
}

// RoutePoolSize is the number of route connections between two cluster
// members, not counting the one the server adds for the system account.
const RoutePoolSize = server.DEFAULT_ROUTE_POOL_SIZE

// ClientURL is the URL clients connect to, such as nats://127.0.0.1:4222.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Name is the server's name.
func (s *Server) Name() string { return s.ns.Name() }

// Config returns the configuration the server was started with, defaults
// filled in.
func (s *Server) Config() Config { return s.cfg }

// NATS returns the underlying nats-server, for tests that need its
// introspection (stream leaders, peers).
func (s *Server) NATS() *server.Server { return s.ns }

// Shutdown stops the server and waits until it has stopped. It is safe to
// call more than once.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	s.unlocked.Do(s.lock.release)
}
