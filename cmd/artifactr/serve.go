package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/actors/agent"
	agentexec "github.com/artifactr/artifactr/actors/agent/exec"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/internal/obs"
	"github.com/artifactr/artifactr/server"
)

// defaultClaimTTL is serve's --claim-ttl, which audit's --stranded-after
// default is derived from.
const defaultClaimTTL = 10 * time.Second

// serveFlags are serve's options.
type serveFlags struct {
	conn          connFlags
	data          string
	listen        string
	noSync        bool
	maxStore      int64
	replicas      int
	guard         string
	agentName     string
	steer         bool
	execTimeout   time.Duration
	echoDelay     time.Duration
	claimTTL      time.Duration
	idleTimeout   time.Duration
	workQueue     string
	shutdownGrace time.Duration
	runnerID      string
	projector     bool
	summaries     string
	metrics       string
	auth          bool
	agentEnv      []string
	openai        openaiFlags

	execCancelGrace time.Duration
	natsFrom        string // " (from NATS_URL)" when the environment named the server
	json            bool
	execMaxBytes    int
	execMaxEvents   int
	execUser        string
	http            httpFlags
}

func (a *app) serveCommand() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve [--agent exec -- PROGRAM [ARGS...] | --agent openai --base-url URL --model NAME]",
		Short: "Run a runner, with an embedded NATS server unless --nats is given",
		Long: `Run a runner that claims threads with work and runs their turns with an
agent.

By default serve embeds nats-server with JetStream: it listens on --listen
and keeps its data in --data, so the other commands (and the nats CLI) can
connect to it. While it runs it holds a lock on the data directory (the file
` + natsembed.LockFile + ` in it; the kernel drops it when the process dies, kill -9
too): a second serve on the same --data, or on a --listen address that is
taken, exits 1 at once and opens nothing. With --nats URL, or ARTIFACTR_NATS
or NATS_URL set, it embeds nothing and uses that server or cluster instead;
start any number of serves on one NATS and they share the threads (use
--replicas 3 on a cluster).

The agent is "echo" (deterministic: "hello" -> "echo: hello"; "ask: Q"
opens a request the next message answers; "fail: R" fails) or "exec", which
runs the program after -- once per turn, speaking JSON lines on stdin and
stdout. The exec protocol, with its size limits, is in
actors/agent/PROTOCOL.md (examples/echo-agent.py implements it); serve
checks at start that the program can be run. Or it is "openai", which
streams each turn from an OpenAI-compatible chat-completions server
(OpenAI, Ollama, vLLM, llama.cpp) at --base-url with --model, the API key
in OPENAI_API_KEY (none for local servers); the model asks the thread's
user with a tool, ask_user (actors/agent/openai). --exec-timeout bounds a turn;
--steer gives messages posted while a run is active to that run as steering
instead of queueing them as the next prompts.

The first SIGINT or SIGTERM stops gracefully: no new claims; active runs
get --shutdown-grace to finish. A run still active then is cancelled and
recorded as run_failed, and that includes a run waiting for an answer to a
request: its question stays unanswered, and a message posted afterwards is
the next runner's new prompt, not an answer. Messages not yet taken stay
pending for the next runner. Every claim is released, then the server stops.
A second signal exits at once: leases then lapse after --claim-ttl and the
next runner abandons the unfinished runs (run_abandoned).`,
		Example: `  artifactr serve
  artifactr serve --data /var/lib/artifactr --listen 0.0.0.0:4222
  artifactr serve --agent exec -- python3 examples/echo-agent.py
  artifactr serve --agent openai --base-url http://localhost:11434/v1 --model llama3.2
  artifactr serve --nats nats://n1:4222,nats://n2:4222 --replicas 3`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.json {
				a.stdout = newJSONLines(a.stdout)
			}
			envURL, from := natsFromEnv()
			external := cmd.Flags().Changed("nats") || envURL != ""
			if !cmd.Flags().Changed("nats") && envURL != "" {
				f.natsFrom = " (from " + from + ")"
			}
			if !external && !cmd.Flags().Changed("auth") && !isLoopback(f.listen) {
				// Reachable from other hosts: nobody gets in without a key.
				f.auth = true
			}
			ag, err := f.agent(cmd, args, a.log)
			if err != nil {
				return err
			}
			if ag, err = f.withConfig(ag, cmd); err != nil {
				return err
			}
			if err := f.validate(external); err != nil {
				return err
			}
			f.openai.probe(cmd.Context(), a.log)
			return a.serve(cmd.Context(), &f, ag, external)
		},
	}
	addConnFlags(cmd, &f.conn)
	fl := cmd.Flags()
	// serve embeds a server unless told where one is, so --nats has no
	// default to show here.
	fl.Lookup("nats").Usage = "use this NATS server or cluster instead of embedding one (env " + envNATS + ", then " + envNATSURL + ")"
	fl.Lookup("nats").DefValue = ""
	fl.StringVar(&f.data, "data", "artifactr-data", "JetStream data directory of the embedded server")
	fl.StringVar(&f.listen, "listen", natsembed.DefaultListen, "client address of the embedded server (port 0: any free port)")
	fl.Int64Var(&f.maxStore, "max-store", 0, "embedded server: JetStream's storage limit in bytes (max_file_store); 0 takes 75% of the disk's free space at start. Leave headroom: see the README's storage section")
	fl.BoolVar(&f.noSync, "no-sync", false, "do not fsync JetStream writes: faster, but acknowledged events can be lost on power failure")
	fl.IntVar(&f.replicas, "replicas", 1, "replicas of the stream and lease bucket when serve creates them (3 on a cluster)")
	fl.StringVar(&f.guard, "guard", string(natsstore.GuardAuto), "guard consuming writes (run_started, answer_given, steering_given, run_abandoned): auto, on or off. "+
		"The guard writes each as an atomic batch with a check that the run subject has not moved since the runner read it, so a writer with runner credentials "+
		"cannot slip a consuming event under this runner's claim between its read and its write and make it write an I1/I3 violation. "+
		"It stores one more message per consuming write, and nats-server syncs a temporary file per batch on a single-replica file stream (about 6 ms a write, against 0.15 ms); "+
		"auto guards on a replicated (--replicas 3) or memory stream only. "+
		"A stream in the run fence layout (--fence run, the default for new streams) needs no guard: each runner write is one compare-and-set on the thread's run subject")
	fl.StringVar(&f.agentName, "agent", "echo", `agent running the turns: "echo", "exec" (program after --) or "openai"`)
	fl.BoolVar(&f.steer, "steer", false, "give messages posted during a run to the run as steering")
	fl.DurationVar(&f.execTimeout, "exec-timeout", agentexec.DefaultTimeout, "bound on one turn of the exec agent (time waiting for answers not counted)")
	fl.DurationVar(&f.execCancelGrace, "exec-cancel-grace", agentexec.DefaultCancelGrace, "how long the exec agent's program has to exit after its run is cancelled (SIGTERM, EOF on stdin) before it is killed")
	fl.IntVar(&f.execMaxBytes, "exec-max-output-bytes", agentexec.DefaultMaxOutputBytes, "output budget of one exec turn in bytes (outputs, questions, final output); past it the run fails and the program is killed")
	fl.IntVar(&f.execMaxEvents, "exec-max-output-events", agentexec.DefaultMaxOutputEvents, "output budget of one exec turn in events (run_output, request_opened); past it the run fails and the program is killed")
	fl.StringVar(&f.execUser, "exec-user", "", "run the exec agent's program as this user (needs serve to run as root), so it cannot read serve's environment or data")
	fl.DurationVar(&f.echoDelay, "echo-delay", 0, "keep each echo run active this long (tests)")
	_ = fl.MarkHidden("echo-delay")
	fl.DurationVar(&f.claimTTL, "claim-ttl", defaultClaimTTL, "lease TTL: how soon a dead runner's threads are taken over")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", 30*time.Second, "release a claim after this long with nothing to do")
	fl.StringVar(&f.workQueue, "work-queue", natsstore.DefaultWorkQueue, "durable consumer the runners share: each post wakes one of them, and goes to another if that one dies before it claims")
	fl.DurationVar(&f.shutdownGrace, "shutdown-grace", 5*time.Second, "on shutdown, how long active runs may take to finish")
	fl.StringVar(&f.runnerID, "runner-id", "", "runner id, the first part of claim holders (default host-pid-random)")
	fl.BoolVar(&f.projector, "projector", true, "keep the thread-summaries read model up to date (one serve at a time does; the others stand by)")
	addSummariesBucketFlag(cmd, &f.summaries)
	fl.StringVar(&f.metrics, "metrics", "", "serve Prometheus /metrics, /healthz and /readyz on this address (host:port); off when empty")
	fl.BoolVar(&f.auth, "auth", false, "embedded server: require nkey logins with per-role permissions; seeds in DATA/auth (default on when --listen is not loopback)")
	fl.StringArrayVar(&f.agentEnv, "agent-env", nil, "environment variable the exec agent may see (repeatable); it gets only these plus PATH, HOME and LANG")
	addOpenAIFlags(cmd, &f.openai)
	fl.BoolVar(&f.json, "json", false, `print the status lines (where serve listens, "ready", "stopped") as JSON objects, one per line: {"time","msg"}; with --log-format json the log on stderr is JSON too`)
	addHTTPFlags(cmd, &f.http)
	return cmd
}

// agent builds the agent from --agent and the arguments after --.
func (f *serveFlags) agent(cmd *cobra.Command, args []string, log *slog.Logger) (agent.Agent, error) {
	dash := cmd.ArgsLenAtDash()
	if dash > 0 || (dash < 0 && len(args) > 0) {
		return nil, usagef("serve takes no arguments; the exec agent's program goes after --")
	}
	for _, n := range []string{"exec-max-output-bytes", "exec-max-output-events", "exec-user"} {
		if f.agentName != "exec" && cmd.Flags().Changed(n) {
			return nil, usagef("--%s is for --agent exec, not %s", n, f.agentName)
		}
	}
	if a, err := f.openai.openaiAgent(cmd, f.agentName, args, f.steer, log); a != nil || err != nil {
		return a, err
	}
	switch f.agentName {
	case "echo":
		if len(args) > 0 {
			return nil, usagef("--agent echo takes no program; did you mean --agent exec?")
		}
		return agent.Echo{Delay: f.echoDelay, Steer: f.steer}, nil
	case "exec":
		if len(args) == 0 {
			return nil, usagef("--agent exec needs a program after --, as in: serve --agent exec -- python3 examples/echo-agent.py")
		}
		// Found now, not at the first turn: a typo would otherwise fail
		// every run, long after serve said it was ready.
		if _, err := exec.LookPath(args[0]); err != nil {
			return nil, usagef("--agent exec: program %q cannot be run: %v", args[0], err)
		}
		env, pass, err := agentEnv(f.agentEnv)
		if err != nil {
			return nil, err
		}
		switch {
		case f.execMaxBytes <= 0:
			return nil, usagef("--exec-max-output-bytes %d: must be positive", f.execMaxBytes)
		case f.execMaxEvents <= 0:
			return nil, usagef("--exec-max-output-events %d: must be positive", f.execMaxEvents)
		}
		if f.execUser != "" {
			if _, err := agentexec.LookupUser(f.execUser); err != nil {
				return nil, usagef("--exec-user: %v", err)
			}
		}
		return agentexec.Agent{Path: args[0], Args: args[1:], Timeout: f.execTimeout, Steer: f.steer, Env: env, PassEnv: pass, CancelGrace: f.execCancelGrace,
			MaxOutputBytes: f.execMaxBytes, MaxOutputEvents: f.execMaxEvents, User: f.execUser}, nil
	}
	return nil, usagef("--agent %q: want echo, exec or openai", f.agentName)
}

func (f *serveFlags) validate(external bool) error {
	switch {
	case f.claimTTL < 100*time.Millisecond:
		return usagef("--claim-ttl %s: must be at least 100ms", f.claimTTL)
	case f.idleTimeout <= 0:
		return usagef("--idle-timeout %s: must be positive", f.idleTimeout)
	case f.shutdownGrace <= 0:
		return usagef("--shutdown-grace %s: must be positive", f.shutdownGrace)
	case f.execTimeout <= 0:
		return usagef("--exec-timeout %s: must be positive", f.execTimeout)
	case f.execCancelGrace <= 0:
		return usagef("--exec-cancel-grace %s: must be positive", f.execCancelGrace)
	case f.echoDelay < 0:
		return usagef("--echo-delay %s: must not be negative", f.echoDelay)
	case f.maxStore < 0:
		return usagef("--max-store %d: must not be negative", f.maxStore)
	case f.replicas < 1 || f.replicas > 5:
		return usagef("--replicas %d: want 1 to 5", f.replicas)
	case f.guard != string(natsstore.GuardAuto) && f.guard != string(natsstore.GuardOn) && f.guard != string(natsstore.GuardOff):
		return usagef("--guard %q: want auto, on or off", f.guard)
	case f.replicas > 1 && !external:
		return usagef("--replicas %d needs a cluster: pass --nats with its URLs", f.replicas)
	case !external && f.data == "":
		return usagef("--data: empty directory")
	case external && f.auth:
		return usagef("--auth sets up the embedded server's users; with --nats, log in with --nkey or --creds")
	case !validName(f.workQueue):
		return usagef("--work-queue %q: want a consumer name of [A-Za-z0-9_-]", f.workQueue)
	case !validName(f.summaries):
		return usagef("--summaries-bucket %q: want a bucket name of [A-Za-z0-9_-]", f.summaries)
	case f.runnerID != "" && !validName(f.runnerID):
		return usagef("--runner-id %q: want [A-Za-z0-9_-]{1,128}: it names the runner's session key and its claims' holders", f.runnerID)
	}
	if !external {
		if err := checkListenForm("--listen", f.listen, true); err != nil {
			return err
		}
		if st, err := os.Stat(f.data); err == nil && !st.IsDir() {
			return usagef("--data %s: not a directory", f.data)
		}
	}
	if f.metrics != "" {
		if err := checkListenForm("--metrics", f.metrics, false); err != nil {
			return err
		}
	}
	for _, tf := range []struct{ flag, path string }{{"--tls-cert", f.conn.tlsCert}, {"--tls-key", f.conn.tlsKey}, {"--tls-ca", f.conn.tlsCA}} {
		if tf.path == "" {
			continue
		}
		if _, err := os.Stat(tf.path); err != nil {
			return usagef("%s: %v", tf.flag, err)
		}
	}
	return f.conn.validate()
}

// checkListenForm checks that addr is host:port with a port of 0 to 65535
// (or -1, a free port, where random is allowed), without binding it.
func checkListenForm(flag, addr string, random bool) error {
	_, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("%s %q: want host:port, such as 127.0.0.1:4222: %v", flag, addr, causeText(err))
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < -1 || port > 65535 || (port == -1 && !random) {
		return usagef("%s %q: the port must be 0 to 65535", flag, addr)
	}
	return nil
}

// preflight checks, before serve writes anything (the data directory, its
// lock file, the --auth seeds), that what serve will bind is free and that
// no other serve holds the data directory.
func (f *serveFlags) preflight(external bool) error {
	if !external {
		if err := natsembed.Preflight(f.data, f.listen); err != nil {
			return fail(err)
		}
	}
	if f.metrics != "" {
		l, err := net.Listen("tcp", f.metrics)
		if err != nil {
			return failf("--metrics %s: cannot listen: %s", f.metrics, causeText(err))
		}
		l.Close()
	}
	return nil
}

// serverLogger quiets nats-server's start-up notices unless debugging;
// its warnings, such as the no-sync one, still show.
func (a *app) serverLogger() *slog.Logger {
	if a.log.Enabled(context.Background(), slog.LevelDebug) {
		return a.log
	}
	return slog.New(newLogHandler(a.stderr, a.logFormat, slog.LevelWarn))
}

func (a *app) serve(ctx context.Context, f *serveFlags, ag agent.Agent, external bool) error {
	if err := f.preflight(external); err != nil {
		return err
	}
	sigs := a.signals
	if sigs == nil {
		ch := make(chan os.Signal, 2)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(ch)
		sigs = ch
	}
	if _, ok := ag.(agentexec.Agent); ok {
		// The programs' orphans become serve's, to be killed with their
		// runs; the last are killed when serve exits (deferred first, so
		// run last).
		if stop, err := agentexec.StartReaper(); err == nil {
			defer stop()
		} else {
			a.log.Warn("processes an exec program leaves outside its process group may outlive its run", "err", err)
		}
	}

	if !external {
		srv, err := a.embed(ctx, f)
		if err != nil {
			return err
		}
		defer srv.Shutdown()
	} else {
		fmt.Fprintf(a.stdout, "artifactr serve: using NATS at %s%s\n", f.conn.url, f.natsFrom)
		fmt.Fprintln(a.stdout, durabilityNote)
	}
	store, err := a.openStore(ctx, &f.conn, f.replicas, false, natsstore.GuardMode(f.guard))
	if err != nil {
		return err
	}
	defer store.Close()
	// Under the run layout the guard is moot: every runner write is one
	// compare-and-set on the run subject.
	a.log.Info("consuming writes", "fence", store.Fence(), "guard", f.guard, "guarded", store.Guarded() && store.Fence() != natsstore.FenceRun)
	tp, stopTracing, err := obs.TracerProviderFromEnv(ctx, "artifactr", a.stderr)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = stopTracing(context.WithoutCancel(ctx)) }()
	cfg := server.Config{
		Store: store,
		Runner: runner.Config{
			Agent:         ag,
			ID:            f.runnerID,
			ClaimTTL:      f.claimTTL,
			IdleTimeout:   f.idleTimeout,
			ShutdownGrace: f.shutdownGrace,
			Logger:        a.log,
		},
		WorkQueue:   f.workQueue,
		Projector:   f.projector,
		Summaries:   f.summaries,
		MetricsAddr: f.metrics,
		Logger:      a.log,
	}
	if tp != nil {
		cfg.TracerProvider = tp
		fmt.Fprintln(a.stdout, "artifactr serve: tracing on (OTEL_* environment): one span per turn")
	}
	if cfg.HTTP, err = f.httpConfig(a.log); err != nil {
		return err
	}
	s, err := server.Start(ctx, cfg)
	if err != nil {
		return serveStartError(f.conn.url, err)
	}
	if addr := s.MetricsAddr(); addr != "" {
		fmt.Fprintf(a.stdout, "artifactr serve: metrics on http://%s/metrics (and /healthz, /readyz)\n", addr)
	}
	if owner := s.ProjectorOwner(); owner != "" {
		fmt.Fprintf(a.stdout, "artifactr serve: thread summaries in KV bucket %s (projector %s)\n", f.summaries, owner)
	}
	if u := s.HTTPURL(); u != "" {
		a.printHTTP(f, u)
	}
	fmt.Fprintf(a.stdout, "artifactr serve: runner %s ready on stream %s (agent %s, claim TTL %s)\n",
		s.ID(), f.conn.stream, ag.Name(), f.claimTTL)
	return a.awaitStop(ctx, sigs, s, f)
}

// serveStartError turns server.Start's error into an exit error: the
// metrics address (taken since preflight) and the runner's or projector's
// config are the command line's fault; the work queue and the runner's
// session are the store's.
func serveStartError(url string, err error) error {
	var se *server.StartError
	if !errors.As(err, &se) {
		return fail(err)
	}
	switch se.Step {
	case server.StepMetrics, server.StepRunner, server.StepProjector:
		return usage(se.Err)
	case server.StepWorkQueue, server.StepStart:
		return storeError(url, se.Err)
	}
	return fail(se.Err)
}

// embed starts the embedded server and points f.conn at it.
func (a *app) embed(ctx context.Context, f *serveFlags) (*natsembed.Server, error) {
	dir, err := filepath.Abs(f.data)
	if err != nil {
		return nil, fail(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, failf("data directory: %v", err)
	}
	cfg := natsembed.Config{DataDir: dir, Listen: f.listen, NoSync: f.noSync, MaxStore: f.maxStore, Logger: a.serverLogger(),
		TLS: natsembed.TLSFiles{Cert: f.conn.tlsCert, Key: f.conn.tlsKey, CA: f.conn.tlsCA}}
	var ea *embeddedAuth
	if f.auth {
		if ea, err = prepareAuth(dir, f.authNames()); err != nil {
			return nil, err
		}
		cfg.AuthConf = ea.conf
	}
	srv, err := natsembed.Start(cfg)
	if err != nil {
		return nil, fail(err)
	}
	// serve's own connections need no socket, so no TLS: a tls:// URL
	// would make the client start TLS on the in-process pipe.
	f.conn.url = strings.Replace(srv.ClientURL(), "tls://", "nats://", 1)
	f.conn.inProcess = srv
	if ea != nil {
		if err := a.adminSetup(ctx, f, ea.admin); err != nil {
			srv.Shutdown()
			return nil, err
		}
		f.conn.key = &ea.runner
	}
	fmt.Fprintf(a.stdout, "artifactr serve: NATS listening on %s, JetStream data in %s\n", srv.ClientURL(), dir)
	a.printSecurity(f, ea)
	if f.noSync {
		fmt.Fprintln(a.stdout, "artifactr serve: warning: --no-sync: writes are not fsynced; acknowledged events can be lost on power failure")
	}
	return srv, nil
}

// quitWait bounds how long a second signal waits for the runner to stop
// before serve exits anyway.
const quitWait = 2 * time.Second

// awaitStop waits for a signal (or ctx's end), then stops s; a second
// signal gives up on draining.
func (a *app) awaitStop(ctx context.Context, sigs <-chan os.Signal, s *server.Server, f *serveFlags) error {
	var why string
	select {
	case s := <-sigs:
		why = s.String()
	case <-ctx.Done():
		why = "context ended"
	}
	fmt.Fprintf(a.stdout, "artifactr serve: %s: draining (runs get %s to finish; signal again to exit at once)\n", why, f.shutdownGrace)
	stopped := make(chan error, 1)
	sctx, cancelStop := context.WithTimeout(context.WithoutCancel(ctx), f.shutdownGrace+2*f.conn.timeout)
	defer cancelStop()
	go func() { stopped <- s.Stop(sctx) }()
	select {
	case err := <-stopped:
		st := s.Stats()
		fmt.Fprintf(a.stdout, "artifactr serve: stopped: %d claims, %d runs completed, %d failed, %d abandoned, %d fenced\n",
			st.Claims, st.Completed, st.Failed, st.Abandoned, st.Fenced)
		if st.NotWritten > 0 {
			// Safe: the claims lapse with the session, and the next
			// runner abandons what they left.
			fmt.Fprintf(a.stdout, "artifactr serve: %d writes (run ends, releases, the session's close) not written: the server is out of storage; "+
				"the session lapses after --claim-ttl (%s), and the next runner abandons the runs left\n", st.NotWritten, f.claimTTL)
		}
		if err != nil {
			return failf("graceful stop: %v", err)
		}
		return nil
	case s := <-sigs:
		// Leave at once: leases lapse and the next holder abandons what
		// was running, which is what the fence is for. Ending the drain
		// stops the runner, releasing nothing, before the store closes
		// under it: it would warn that it cannot follow the stream.
		cancelStop()
		select {
		case <-stopped:
		case <-time.After(quitWait):
		}
		return failf("%s again: exiting without releasing claims", s)
	}
}
