package openai

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults for the zero fields of a [Config].
const (
	DefaultRequestTimeout  = 10 * time.Minute
	DefaultIdleTimeout     = 2 * time.Minute
	DefaultMaxRetries      = 4
	DefaultMaxRetryWait    = time.Minute
	DefaultFlushInterval   = 50 * time.Millisecond
	DefaultFlushBytes      = 1024
	DefaultMaxToolRounds   = 8
	DefaultAssistantAuthor = "assistant"
)

// Config configures an [Agent]. Only BaseURL and Model are required; zero
// fields take the defaults above.
type Config struct {
	// BaseURL is the API root that "/chat/completions" is appended to:
	// https://api.openai.com/v1, http://localhost:11434/v1 (Ollama),
	// http://localhost:8000/v1 (vLLM), http://localhost:8080/v1 (llama.cpp).
	BaseURL string
	// Model names the model, as the server knows it.
	Model string
	// APIKey is sent as "Authorization: Bearer APIKey" when not empty.
	// Local servers such as Ollama need none.
	APIKey string
	// System, when not empty, is the conversation's first message, with
	// role "system".
	System string
	// AssistantAuthor is the author of the thread messages that the model
	// sees as its own (role "assistant"); every other message is the user's.
	AssistantAuthor string

	// RequestTimeout bounds one request, from sending it to the stream's
	// end. Time waiting for a user's answer is between requests and is not
	// counted.
	RequestTimeout time.Duration
	// IdleTimeout bounds the time without a byte from the server, before
	// the response headers and between stream chunks: a server that stalls
	// mid-stream fails the run this long after its last byte.
	IdleTimeout time.Duration
	// MaxRetries bounds the retries of a request refused with 429 (rate
	// limited) or 500, 502, 503, 504 before any of its stream was read.
	// Negative: no retries.
	MaxRetries int
	// MaxRetryWait caps a wait between retries. A Retry-After longer than
	// this fails the run at once rather than hold it.
	MaxRetryWait time.Duration

	// FlushInterval and FlushBytes coalesce streamed tokens into run_output
	// events: buffered text is emitted FlushInterval after its first byte,
	// or as soon as it reaches FlushBytes, whichever comes first.
	FlushInterval time.Duration
	FlushBytes    int

	// MaxToolRounds bounds the requests of one turn: each round of tool
	// calls, and each reply followed by steering, costs one more.
	MaxToolRounds int
	// Steer makes the agent steerable: a message posted during a run is
	// added to its conversation as the user's, and once the model's current
	// reply ends it is asked again, with the reply so far before it.
	Steer bool
	// NoTools leaves the ask_user tool out of requests, for models or
	// servers that refuse tools.
	NoTools bool

	// Logger gets the agent's warnings: each retry, a stream that ended
	// without [DONE], and what [Agent.Probe] found. Nil means
	// slog.Default().
	Logger *slog.Logger

	// HTTPClient sends the requests. Its Timeout must be zero, as streams
	// outlive any fixed bound; RequestTimeout bounds them instead. Default:
	// a client of its own over a clone of http.DefaultTransport.
	HTTPClient *http.Client
}

func (c *Config) setDefaults() {
	c.BaseURL = strings.TrimRight(strings.TrimSpace(c.BaseURL), "/")
	if c.AssistantAuthor == "" {
		c.AssistantAuthor = DefaultAssistantAuthor
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	switch {
	case c.MaxRetries == 0:
		c.MaxRetries = DefaultMaxRetries
	case c.MaxRetries < 0:
		c.MaxRetries = 0
	}
	if c.MaxRetryWait == 0 {
		c.MaxRetryWait = DefaultMaxRetryWait
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.FlushBytes == 0 {
		c.FlushBytes = DefaultFlushBytes
	}
	if c.MaxToolRounds == 0 {
		c.MaxToolRounds = DefaultMaxToolRounds
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.BaseURL == "" {
		errs = append(errs, errors.New("openai: BaseURL is empty (want e.g. http://localhost:11434/v1)"))
	} else if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("openai: BaseURL %q: want an http:// or https:// URL with a host", c.BaseURL))
	} else if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		errs = append(errs, fmt.Errorf("openai: BaseURL %q: want no query, fragment or user info; the key goes in APIKey", u.Redacted()))
	}
	if strings.TrimSpace(c.Model) == "" {
		errs = append(errs, errors.New("openai: Model is empty"))
	}
	if strings.ContainsAny(c.APIKey, "\r\n") {
		errs = append(errs, errors.New("openai: APIKey contains a line break"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"RequestTimeout", c.RequestTimeout}, {"IdleTimeout", c.IdleTimeout}, {"MaxRetryWait", c.MaxRetryWait}, {"FlushInterval", c.FlushInterval}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("openai: %s %s is negative", d.name, d.v))
		}
	}
	if c.FlushBytes < 0 {
		errs = append(errs, fmt.Errorf("openai: FlushBytes %d is negative", c.FlushBytes))
	}
	if c.MaxToolRounds < 0 {
		errs = append(errs, fmt.Errorf("openai: MaxToolRounds %d is negative", c.MaxToolRounds))
	}
	if c.HTTPClient.Timeout != 0 {
		errs = append(errs, fmt.Errorf("openai: HTTPClient.Timeout %s would cut streams; leave it 0 and set RequestTimeout", c.HTTPClient.Timeout))
	}
	return errors.Join(errs...)
}
