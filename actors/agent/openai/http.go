package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// baseBackoff is the first wait before retrying a refused request that
// named no Retry-After; it doubles with each retry, up to MaxRetryWait.
const baseBackoff = 500 * time.Millisecond

// Causes of a request's context ending on its own, told apart from the
// run's context being cancelled.
var (
	errIdle           = errors.New("openai: idle timeout")
	errRequestTimeout = errors.New("openai: request timeout")
)

// request is one open streaming response. close releases everything it
// holds: the body, its idle watchdog and its context.
type request struct {
	resp  *http.Response
	ctx   context.Context // ends on the run's cancel, the timeout or idleness
	close func()
}

// open POSTs body to the chat-completions endpoint and returns the response
// once it is a 2xx event stream. It retries a 429 or a 5xx that may pass,
// as the server's Retry-After says or with backoff, up to MaxRetries times;
// no retry happens once a stream has begun, so no output is sent twice.
func (a *Agent) open(ctx context.Context, body []byte) (*request, error) {
	for attempt := 0; ; attempt++ {
		req, status, err := a.try(ctx, body)
		if err == nil {
			return req, nil
		}
		if !retryable(status) || attempt >= a.cfg.MaxRetries {
			if retryable(status) && a.cfg.MaxRetries > 0 {
				err = fmt.Errorf("%w (gave up after %d retries)", err, attempt)
			}
			return nil, err
		}
		var wait time.Duration
		var se *statusError
		if errors.As(err, &se) && se.retryAfter >= 0 {
			wait = se.retryAfter
			if wait > a.cfg.MaxRetryWait {
				return nil, fmt.Errorf("%w: the server asks to retry after %s, over the %s limit (serve --openai-max-retry-wait)", err, wait, a.cfg.MaxRetryWait)
			}
		} else {
			wait = backoff(attempt, a.cfg.MaxRetryWait)
		}
		a.cfg.Logger.Warn("openai: request refused; retrying", "endpoint", a.endpoint, "status", status,
			"retry", attempt+1, "of", a.cfg.MaxRetries, "in", wait, "err", err)
		if !a.sleep(ctx, wait) {
			return nil, fmt.Errorf("openai: %w while waiting %s to retry after: %v", context.Cause(ctx), wait, err)
		}
	}
}

// try makes one attempt. On failure it returns the HTTP status, or 0 when
// there was no response.
func (a *Agent) try(ctx context.Context, body []byte) (*request, int, error) {
	rctx, cancel := context.WithCancelCause(ctx)
	tctx, cancelT := context.WithTimeoutCause(rctx, a.cfg.RequestTimeout, errRequestTimeout)
	idle := time.AfterFunc(a.cfg.IdleTimeout, func() { cancel(errIdle) })
	release := func() {
		idle.Stop()
		cancelT()
		cancel(nil)
	}
	hreq, err := http.NewRequestWithContext(tctx, http.MethodPost, a.endpoint, bytes.NewReader(body))
	if err != nil {
		release()
		return nil, 0, fmt.Errorf("openai: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if a.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+a.cfg.APIKey)
	}
	// The turn's span, when tracing is on: a server that traces (vLLM)
	// joins the poster's trace.
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(hreq.Header))
	resp, err := a.cfg.HTTPClient.Do(hreq)
	if err != nil {
		err = a.cause(ctx, tctx, err)
		release()
		return nil, 0, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := a.statusError(resp)
		resp.Body.Close()
		release()
		return nil, resp.StatusCode, err
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "" && ct != "text/event-stream" {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		release()
		return nil, resp.StatusCode, fmt.Errorf("openai: POST %s: answered %s with %s, not an event stream: %s",
			a.endpoint, resp.Status, ct, errorMessage(msg))
	}
	resp.Body = &idleBody{ReadCloser: resp.Body, idle: idle, d: a.cfg.IdleTimeout}
	return &request{resp: resp, ctx: tctx, close: func() { resp.Body.Close(); release() }}, 0, nil
}

// cause explains err, met while reading a request whose context is rctx:
// the run's cancel, the request's timeout, idleness, or err itself.
func (a *Agent) cause(ctx, rctx context.Context, err error) error {
	switch c := context.Cause(rctx); {
	case ctx.Err() != nil:
		return fmt.Errorf("openai: %w", context.Cause(ctx))
	case errors.Is(c, errIdle):
		return fmt.Errorf("openai: no data from %s for %s (serve --openai-idle-timeout)", a.endpoint, a.cfg.IdleTimeout)
	case errors.Is(c, errRequestTimeout):
		return fmt.Errorf("openai: request to %s timed out after %s (serve --openai-timeout)", a.endpoint, a.cfg.RequestTimeout)
	}
	return fmt.Errorf("openai: POST %s: %w", a.endpoint, err)
}

// idleBody re-arms the idle watchdog on every byte read, so only silence
// ends the request.
type idleBody struct {
	io.ReadCloser
	idle *time.Timer
	d    time.Duration
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.idle.Reset(b.d)
	}
	return n, err
}

// statusError is a non-2xx answer.
type statusError struct {
	endpoint   string
	status     string
	msg        string
	retryAfter time.Duration // -1 when the server named none
}

func (e *statusError) Error() string {
	return fmt.Sprintf("openai: POST %s: %s: %s", e.endpoint, e.status, e.msg)
}

func (a *Agent) statusError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return &statusError{
		endpoint:   a.endpoint,
		status:     resp.Status,
		msg:        errorMessage(body),
		retryAfter: retryAfter(resp.Header, a.now()),
	}
}

// backoff is the wait before retry attempt+1 when the server named none:
// baseBackoff doubled attempt times, at most limit.
func backoff(attempt int, limit time.Duration) time.Duration {
	if attempt >= 30 { // past any sane limit; and the shift would overflow
		return limit
	}
	return min(baseBackoff<<attempt, limit)
}

// retryable reports whether a request refused with status may pass later.
func retryable(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retryAfter reads how long the server asks to wait: OpenAI's
// retry-after-ms, or Retry-After in seconds or as an HTTP date. It returns
// -1 when neither is there or readable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return -1
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 || s > 1e9 {
			return -1
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return -1
}

// errorMessage finds the message in an error body: OpenAI's
// {"error":{"message":...}}, {"error":"..."} (Ollama's native API),
// {"message":...}, or FastAPI's {"detail":...}; otherwise the body itself.
func errorMessage(body []byte) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &e) == nil {
		var obj apiError
		var s string
		switch {
		case json.Unmarshal(e.Error, &obj) == nil && obj.Message != "":
			return obj.describe()
		case json.Unmarshal(e.Error, &s) == nil && s != "":
			return s
		case e.Message != "":
			return e.Message
		case json.Unmarshal(e.Detail, &s) == nil && s != "":
			return s
		case len(e.Detail) > 0 && string(e.Detail) != "null":
			return string(e.Detail)
		}
	}
	text := strings.TrimSpace(string(body))
	if text == "" {
		return "(empty body)"
	}
	if len(text) > 300 {
		return quoteCut(text, 300)
	}
	return text
}
