package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsauth"
)

// DefaultURL is the NATS server Dial connects to when Config.URL is empty:
// where `artifactr serve` listens by default.
const DefaultURL = "nats://127.0.0.1:4222"

// Config configures [Dial]. The zero value connects to [DefaultURL] with
// no credentials.
type Config struct {
	// URL is the NATS server, or several comma-separated. Default
	// DefaultURL.
	URL string
	// Stream is the JetStream stream holding the threads. Default
	// natsstore.DefaultStream.
	Stream string
	// Partitions is the deployment's partition count
	// (natsstore.Config.Partitions). Default 1; Dial fails with an error
	// wrapping events.ErrLayout when it differs from the deployment's.
	Partitions int
	// Timeout bounds connecting and each NATS call when the call's context
	// has no earlier deadline. Default natsstore.DefaultTimeout.
	Timeout time.Duration

	// NKeyFile is a file holding the user nkey seed to log in with, such
	// as the DATA/auth/client.nk that `serve --auth` keeps. It must not be
	// readable by group or others. Give at most one of NKeyFile and
	// CredsFile.
	NKeyFile string
	// CredsFile is a NATS JWT credentials file, for operator-mode
	// deployments.
	CredsFile string
	// TLSCA is a CA (PEM) to trust the server's certificate by.
	TLSCA string
	// TLSCert and TLSKey (PEM) present a client certificate; give both or
	// neither.
	TLSCert, TLSKey string
	// NATSOptions are added to the connection's options after the ones
	// above, such as nats.InProcessServer.
	NATSOptions []nats.Option

	// ReadOnly creates nothing: Dial fails with an error wrapping
	// natsstore.ErrNoStream when the stream or the lease bucket is missing.
	// Otherwise Dial creates them on first use, as `artifactr post` does.
	ReadOnly bool
	// NewFence is the fence layout of a stream Dial makes
	// (natsstore.Config.NewFence); a stream already there keeps its own.
	// Default natsstore.FenceRun, as `artifactr serve` makes one.
	NewFence natsstore.FenceLayout
	// Logger receives the store's warnings. Default discards.
	Logger *slog.Logger
}

// Client talks to an artifactr stream: it posts, forks, waits for runs and
// reads threads. It is safe for concurrent use. Close it when done.
type Client struct {
	store Store
	url   string

	mu      sync.Mutex           // protects buckets
	buckets map[string]delayedKV // opened delayed-post buckets
}

// Dial connects to the NATS server of cfg and opens its artifactr stream.
// An error wrapping events.ErrUnavailable means the server could not be
// reached within the timeout; natsstore.ErrNoStream, with ReadOnly, that it
// has no such stream.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.URL == "" {
		cfg.URL = DefaultURL
	}
	opts, err := cfg.natsOptions()
	if err != nil {
		return nil, err
	}
	s, err := natsstore.New(ctx, natsstore.Config{
		URL:            cfg.URL,
		Stream:         cfg.Stream,
		Partitions:     cfg.Partitions,
		Timeout:        cfg.Timeout,
		Logger:         cfg.Logger,
		NoCreate:       cfg.ReadOnly,
		ConnectOptions: opts,
		NewFence:       cmp.Or(cfg.NewFence, natsstore.FenceRun),
	})
	if err != nil {
		return nil, fmt.Errorf("client: dial %s: %w", cfg.URL, err)
	}
	return &Client{store: s, url: cfg.URL}, nil
}

// natsOptions are the connect options for the credentials and TLS files.
func (cfg *Config) natsOptions() ([]nats.Option, error) {
	var o []nats.Option
	switch {
	case cfg.NKeyFile != "" && cfg.CredsFile != "":
		return nil, errors.New("client: Config has NKeyFile and CredsFile; give one")
	case (cfg.TLSCert == "") != (cfg.TLSKey == ""):
		return nil, errors.New("client: Config.TLSCert and TLSKey go together")
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("client: negative Config.Timeout %s", cfg.Timeout)
	case cfg.NKeyFile != "":
		k, err := natsauth.ReadSeedFile(cfg.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("client: NKeyFile: %w", err)
		}
		o = append(o, NKeyOption(k.Public, k.Seed))
	case cfg.CredsFile != "":
		if _, err := os.Stat(cfg.CredsFile); err != nil {
			return nil, fmt.Errorf("client: CredsFile: %w", err)
		}
		o = append(o, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.TLSCA != "" {
		o = append(o, nats.RootCAs(cfg.TLSCA))
	}
	if cfg.TLSCert != "" {
		o = append(o, nats.ClientCert(cfg.TLSCert, cfg.TLSKey))
	}
	return append(o, cfg.NATSOptions...), nil
}

// NKeyOption logs in as the nkey user public, signing the server's nonce
// with seed. The seed is parsed anew for each signature and wiped after.
func NKeyOption(public string, seed []byte) nats.Option {
	return nats.Nkey(public, func(nonce []byte) ([]byte, error) {
		kp, err := nkeys.FromSeed(seed)
		if err != nil {
			return nil, err
		}
		defer kp.Wipe()
		return kp.Sign(nonce)
	})
}

// URL returns the URL the client dialled, "" for one made by [New].
func (c *Client) URL() string { return c.url }

// Close closes the connection.
func (c *Client) Close() error { return c.store.Close() }
