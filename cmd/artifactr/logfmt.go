package main

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// newLogHandler is the handler of the CLI's log on w: "text", short lines
// for a terminal ("15:04:05.000 INFO run ended thread=t1 ..."), or "json",
// slog's JSON objects, one per line. protoactor's own records below warn
// (such as "actor system started") are left out unless lvl is debug.
func newLogHandler(w io.Writer, format string, lvl slog.Level) slog.Handler {
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = newShortHandler(w, opts)
	}
	return &quietLibHandler{Handler: h, debug: lvl <= slog.LevelDebug}
}

// shortHandler writes "TIME LEVEL MSG k=v ..." lines: the time of day only,
// and no keys for the time, level and message, so that a line says what
// happened within a terminal's width. The attributes are slog's text
// format.
type shortHandler struct {
	inner slog.Handler // a TextHandler writing to out, without time, level and msg
	out   *prefixWriter
}

// prefixWriter writes each line the inner handler makes, after the prefix
// Handle set. mu makes the two one write, for every handler derived from
// the same root.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	line := p.prefix
	if len(b) > 1 { // more than the newline: attributes follow
		line = append(line, ' ')
	}
	line = append(line, b...)
	if _, err := p.w.Write(line); err != nil {
		return 0, err
	}
	return len(b), nil
}

func newShortHandler(w io.Writer, opts *slog.HandlerOptions) *shortHandler {
	out := &prefixWriter{w: w}
	inner := slog.NewTextHandler(out, &slog.HandlerOptions{
		Level: opts.Level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
				return slog.Attr{}
			}
			return a
		},
	})
	return &shortHandler{inner: inner, out: out}
}

func (h *shortHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *shortHandler) Handle(ctx context.Context, r slog.Record) error {
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	prefix := t.Local().AppendFormat(nil, "15:04:05.000")
	prefix = append(prefix, ' ')
	prefix = append(prefix, r.Level.String()...)
	prefix = append(prefix, ' ')
	prefix = append(prefix, r.Message...)
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	h.out.prefix = prefix
	return h.inner.Handle(ctx, r)
}

func (h *shortHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &shortHandler{inner: h.inner.WithAttrs(as), out: h.out}
}

func (h *shortHandler) WithGroup(name string) slog.Handler {
	return &shortHandler{inner: h.inner.WithGroup(name), out: h.out}
}

// quietLibHandler drops the info and debug records of loggers tagged
// lib=protoactor: the actor library's start-up notices are not serve's to
// tell. Its warnings and errors still show.
type quietLibHandler struct {
	slog.Handler
	debug bool
	quiet bool // this logger is protoactor's
}

func (h *quietLibHandler) Enabled(ctx context.Context, l slog.Level) bool {
	if h.quiet && !h.debug && l < slog.LevelWarn {
		return false
	}
	return h.Handler.Enabled(ctx, l)
}

func (h *quietLibHandler) Handle(ctx context.Context, r slog.Record) error {
	if !h.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h *quietLibHandler) WithAttrs(as []slog.Attr) slog.Handler {
	quiet := h.quiet
	for _, a := range as {
		if a.Key == "lib" && a.Value.String() == "protoactor" {
			quiet = true
		}
	}
	return &quietLibHandler{Handler: h.Handler.WithAttrs(as), debug: h.debug, quiet: quiet}
}

func (h *quietLibHandler) WithGroup(name string) slog.Handler {
	return &quietLibHandler{Handler: h.Handler.WithGroup(name), debug: h.debug, quiet: h.quiet}
}
