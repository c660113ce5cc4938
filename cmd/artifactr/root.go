package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/projections/summaries"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the work failed
	exitUsage = 2 // the command line is wrong
)

// Defaults shared by the commands that talk to NATS. --nats wins, then
// ARTIFACTR_NATS, then NATS_URL, which every nats tool reads.
const (
	envNATS        = "ARTIFACTR_NATS"
	envNATSURL     = "NATS_URL"
	defaultNATSURL = "nats://127.0.0.1:4222"
)

// natsFromEnv is the NATS URL the environment names, and the variable that
// named it; "" when neither is set.
func natsFromEnv() (url, from string) {
	for _, name := range []string{envNATS, envNATSURL} {
		if v := os.Getenv(name); v != "" {
			return v, name
		}
	}
	return "", ""
}

// exitError carries an exit code through cobra. Every RunE returns one (or
// nil); any other error comes from cobra itself, which means bad usage.
type exitError struct {
	code int
	err  error
	// quiet: the command already told the user; print nothing more.
	quiet bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// fail is a failure of the work: exit 1.
func fail(err error) error { return &exitError{code: exitFail, err: err} }

// failf formats a failure of the work.
func failf(format string, args ...any) error { return fail(fmt.Errorf(format, args...)) }

// usage is a command-line error: exit 2.
func usage(err error) error { return &exitError{code: exitUsage, err: err} }

// usagef formats a command-line error.
func usagef(format string, args ...any) error { return usage(fmt.Errorf(format, args...)) }

// silent exits with code after the command printed its own outcome.
func silent(code int, err error) error { return &exitError{code: code, err: err, quiet: true} }

// run is the whole CLI with an empty stdin, as tests run it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runIO(ctx, args, strings.NewReader(""), stdout, stderr)
}

// runIO is the whole CLI; main only calls it.
func runIO(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := app.rootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetIn(stdin)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	hint := fmt.Sprintf("Run 'artifactr %s--help' for usage.\n", pathSpace(subPath(cmd)))
	var ee *exitError
	if errors.As(err, &ee) {
		if !ee.quiet {
			fmt.Fprintf(stderr, "artifactr: %s\n", withoutPackages(ee.err.Error()))
			if ee.code == exitUsage {
				fmt.Fprint(stderr, hint)
			}
		}
		return ee.code
	}
	// Errors cobra makes itself: unknown command or flag, wrong arguments.
	fmt.Fprintf(stderr, "artifactr: %v\n", err)
	fmt.Fprint(stderr, hint)
	return exitUsage
}

func pathSpace(p string) string {
	if p == "" {
		return ""
	}
	return p + " "
}

// app holds what every command shares.
type app struct {
	stdin          io.Reader // post - reads the text from it
	stdout, stderr io.Writer
	logLevel       string
	logFormat      string
	log            *slog.Logger
	// signals, when set, stand for the process's SIGINT and SIGTERM in
	// serve: tests send them in-process.
	signals <-chan os.Signal
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "artifactr",
		Short: "An event-sourced actor runtime for AI-agent threads on NATS JetStream",
		Long: `artifactr hosts AI-agent threads as actors whose every step is an event in
one NATS JetStream stream, the audit log. A claim fences the writes that
consume messages, so a stalled or partitioned runner can never make a message
the prompt of two runs.

Start a server with 'artifactr serve', then post with 'artifactr post'. Or try
'artifactr demo', which needs no setup.

Exit codes: 0 success, 1 the work failed, 2 usage error.`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		Args:              cobra.NoArgs,
		PersistentPreRunE: a.setup,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(a.stderr)
			_ = cmd.Help()
			return silent(exitUsage, errors.New("no command"))
		},
	}
	// cobra's own `completion bash|zsh|fish|powershell`.
	root.CompletionOptions.HiddenDefaultCmd = false
	root.Version = buildVersion().String()
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "info", "log level on stderr: debug, info, warn or error")
	root.PersistentFlags().StringVar(&a.logFormat, "log-format", "text", `log lines on stderr: "text" (short lines: time, level, message, key=value) or "json" (one object per line)`)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usage(err) })
	root.AddCommand(
		a.serveCommand(),
		a.initCommand(),
		a.postCommand(),
		a.forkCommand(),
		a.cancelCommand(),
		a.configureCommand(),
		a.watchCommand(),
		a.threadsCommand(),
		a.showCommand(),
		a.auditCommand(),
		a.projectionsCommand(),
		a.demoCommand(),
		a.benchCommand(),
		a.versionCommand(),
	)
	return root
}

// subPath is the command's path without the root's name.
func subPath(cmd *cobra.Command) string {
	p := cmd.CommandPath()
	p = strings.TrimPrefix(p, "artifactr")
	return strings.TrimSpace(p)
}

// setup runs before every command: it makes the logger.
func (a *app) setup(cmd *cobra.Command, _ []string) error {
	a.warnOldFlags(cmd)
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(a.logLevel)); err != nil {
		return usagef("--log-level %q: want debug, info, warn or error", a.logLevel)
	}
	if a.logFormat != "text" && a.logFormat != "json" {
		return usagef("--log-format %q: want text or json", a.logFormat)
	}
	a.log = slog.New(newLogHandler(a.stderr, a.logFormat, lvl))
	return nil
}

// addSummariesBucketFlag adds --summaries-bucket, the one name of the
// read model's bucket on every command, and --bucket, the name threads and
// projections had, as a hidden alias for a release.
func addSummariesBucketFlag(cmd *cobra.Command, bucket *string) {
	fl := cmd.Flags()
	fl.StringVar(bucket, "summaries-bucket", summaries.DefaultBucket, "KV bucket of the thread-summaries read model")
	fl.StringVar(bucket, "bucket", summaries.DefaultBucket, "old name of --summaries-bucket")
	_ = fl.MarkHidden("bucket")
}

// oldFlagNames maps the hidden aliases to the names that replace them.
var oldFlagNames = map[string]string{"bucket": "summaries-bucket"}

// warnOldFlags says on stderr which old flag names were used. (cobra's
// MarkDeprecated would say it on stdout, into a --json document.)
func (a *app) warnOldFlags(cmd *cobra.Command) {
	for old, name := range oldFlagNames {
		if f := cmd.Flags().Lookup(old); f != nil && f.Hidden && f.Changed {
			fmt.Fprintf(a.stderr, "artifactr: --%s is now --%s; the old name will go in a later release\n", old, name)
		}
	}
}

// connFlags are the flags of every command that talks to NATS.
type connFlags struct {
	url        string
	stream     string
	partitions int
	fence      string
	timeout    time.Duration
	secFlags
}

func addConnFlags(cmd *cobra.Command, c *connFlags) {
	def := defaultNATSURL
	if v, _ := natsFromEnv(); v != "" {
		def = v
	}
	cmd.Flags().StringVar(&c.url, "nats", def, "NATS server URL(s), comma-separated (env "+envNATS+", then "+envNATSURL+")")
	cmd.Flags().StringVar(&c.stream, "stream", natsstore.DefaultStream, "JetStream stream holding the threads")
	cmd.Flags().IntVar(&c.partitions, "partitions", 1, "partitions of the thread log, each a stream <stream>-p<N> with its own leader (1: the one stream --stream); fixed when init or serve creates the streams, and every command must pass the same")
	cmd.Flags().StringVar(&c.fence, "fence", string(natsstore.FenceRun), "where a stream this command creates keeps its claim markers: run (on each thread's run subject, so every runner write is one compare-and-set there) or claim (on threads.T.claim, the older layout); an existing stream keeps the layout it records")
	cmd.Flags().DurationVar(&c.timeout, "timeout", natsstore.DefaultTimeout, "bound on connecting and on each NATS call")
	addSecFlags(cmd, &c.secFlags)
}

func (c *connFlags) validate() error {
	if c.timeout <= 0 {
		return usagef("--timeout %s: must be positive", c.timeout)
	}
	if err := validateNATSURLs(c.url); err != nil {
		return err
	}
	if !validName(c.stream) {
		return usagef("--stream %q: want a stream name of [A-Za-z0-9_-]", c.stream)
	}
	if c.partitions < 1 || c.partitions > events.MaxPartitions {
		return usagef("--partitions %d: want 1 to %d", c.partitions, events.MaxPartitions)
	}
	if _, err := natsstore.ParseFenceLayout(c.fence); err != nil {
		return usagef("--fence %v", err)
	}
	return c.secFlags.validate()
}

// open connects to the store, creating the stream and the lease bucket
// when missing. An unreachable server fails with a hint.
func (a *app) open(ctx context.Context, c *connFlags, replicas int) (*natsstore.Store, error) {
	return a.openStore(ctx, c, replicas, false, natsstore.GuardAuto)
}

// openRead connects to the store of a command that only reads: it creates
// nothing, and a server without the stream fails with exit 1.
func (a *app) openRead(ctx context.Context, c *connFlags) (*natsstore.Store, error) {
	return a.openStore(ctx, c, 0, true, natsstore.GuardAuto)
}

func (a *app) openStore(ctx context.Context, c *connFlags, replicas int, readOnly bool, guard natsstore.GuardMode) (*natsstore.Store, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	opts, err := c.natsOptions()
	if err != nil {
		return nil, err
	}
	s, err := natsstore.New(ctx, natsstore.Config{
		URL:            c.url,
		Stream:         c.stream,
		Partitions:     c.partitions,
		Replicas:       replicas,
		Timeout:        c.timeout,
		Logger:         a.log,
		NoCreate:       readOnly,
		ConnectOptions: opts,
		Guard:          guard,
		NewFence:       natsstore.FenceLayout(c.fence),
	})
	if err != nil {
		return nil, openError(c.url, c.stream, err)
	}
	return s, nil
}

// validName reports whether s can name a stream, bucket, consumer or
// runner: one subject token of [A-Za-z0-9_-], as thread ids are.
func validName(s string) bool { return events.ValidateThreadID(s) == nil }

// openError explains a failed connection, with one hint. It names the URL
// once: the errors it wraps each name it again.
func openError(url, stream string, err error) error {
	if aerr := authError(url, err); aerr != nil {
		return aerr
	}
	if oerr := overlapError(url, stream, err); oerr != nil {
		return fail(oerr)
	}
	switch {
	case errors.Is(err, events.ErrUnavailable):
		return failf("cannot reach NATS at %s: %s\nhint: is `artifactr serve` running? start it, or pass --nats URL (or set %s)", url, causeText(err), envNATS)
	case errors.Is(err, natsstore.ErrNoStream):
		return failf("%s\nhint: 'artifactr serve' or 'artifactr post' creates it; or are --nats and --stream right?", causeText(err))
	}
	return fail(err)
}

// storeError turns an error from a store call into an exit error.
func storeError(url string, err error) error {
	switch {
	case errors.Is(err, events.ErrInvalidThreadID):
		return usage(err)
	case errors.Is(err, events.ErrConflict):
		return fail(err)
	case errors.Is(err, events.ErrNoStorage) && !errors.Is(err, events.ErrUnavailable):
		// A definite refusal: say so first, not as an unreachable server.
		return failf("not written: the server at %s is out of storage (free space, or raise its max_file_store; see the README's storage section): %v", url, err)
	case errors.Is(err, events.ErrNoStorage):
		return failf("outcome unknown: the server at %s is out of storage, and an earlier attempt may have landed; post again with the same --id to settle it: %v", url, err)
	case errors.Is(err, events.ErrUnavailable):
		return failf("NATS at %s: %s", url, causeText(err))
	}
	return fail(err)
}

// threadArg validates a thread id given on the command line.
func threadArg(id string) error {
	if err := events.ValidateThreadID(id); err != nil {
		return usage(err)
	}
	return nil
}
