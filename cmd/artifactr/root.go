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
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the work failed
	exitUsage = 2 // the command line is wrong
)

// Defaults shared by the commands that talk to NATS.
const (
	envNATS        = "ARTIFACTR_NATS"
	defaultNATSURL = "nats://127.0.0.1:4222"
)

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
			fmt.Fprintf(stderr, "artifactr: %v\n", ee.err)
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
	log            *slog.Logger
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
	root.CompletionOptions.DisableDefaultCmd = true
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "info", "log level on stderr: debug, info, warn or error")
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
func (a *app) setup(*cobra.Command, []string) error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(a.logLevel)); err != nil {
		return usagef("--log-level %q: want debug, info, warn or error", a.logLevel)
	}
	a.log = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: lvl}))
	return nil
}

// connFlags are the flags of every command that talks to NATS.
type connFlags struct {
	url     string
	stream  string
	timeout time.Duration
	secFlags
}

func addConnFlags(cmd *cobra.Command, c *connFlags) {
	def := defaultNATSURL
	if v := os.Getenv(envNATS); v != "" {
		def = v
	}
	cmd.Flags().StringVar(&c.url, "nats", def, "NATS server URL(s), comma-separated (env "+envNATS+")")
	cmd.Flags().StringVar(&c.stream, "stream", natsstore.DefaultStream, "JetStream stream holding the threads")
	cmd.Flags().DurationVar(&c.timeout, "timeout", natsstore.DefaultTimeout, "bound on connecting and on each NATS call")
	addSecFlags(cmd, &c.secFlags)
}

func (c *connFlags) validate() error {
	if c.timeout <= 0 {
		return usagef("--timeout %s: must be positive", c.timeout)
	}
	if c.url == "" {
		return usagef("--nats: empty URL")
	}
	return c.secFlags.validate()
}

// open connects to the store, creating the stream and the lease bucket
// when missing. An unreachable server fails with a hint.
func (a *app) open(ctx context.Context, c *connFlags, replicas int) (*natsstore.Store, error) {
	return a.openStore(ctx, c, replicas, false)
}

// openRead connects to the store of a command that only reads: it creates
// nothing, and a server without the stream fails with exit 1.
func (a *app) openRead(ctx context.Context, c *connFlags) (*natsstore.Store, error) {
	return a.openStore(ctx, c, 0, true)
}

func (a *app) openStore(ctx context.Context, c *connFlags, replicas int, readOnly bool) (*natsstore.Store, error) {
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
		Replicas:       replicas,
		Timeout:        c.timeout,
		Logger:         a.log,
		NoCreate:       readOnly,
		ConnectOptions: opts,
	})
	if err != nil {
		return nil, openError(c.url, err)
	}
	return s, nil
}

// openError explains a failed connection, with one hint.
func openError(url string, err error) error {
	if aerr := authError(url, err); aerr != nil {
		return aerr
	}
	switch {
	case errors.Is(err, events.ErrUnavailable):
		return failf("cannot reach NATS at %s: %v\nhint: is `artifactr serve` running? start it, or pass --nats URL (or set %s)", url, err, envNATS)
	case errors.Is(err, natsstore.ErrNoStream):
		return failf("%v\nhint: 'artifactr serve' or 'artifactr post' creates it; or are --nats and --stream right?", err)
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
		return failf("NATS at %s: %v", url, err)
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
