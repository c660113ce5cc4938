package natsembedtest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/artifactr/artifactr/internal/testkit"
)

// testHandler writes records at or above level to t.Log until the test's
// cleanup has run; later records (from goroutines still stopping) are
// dropped, because t.Log panics after a test ends.
type testHandler struct {
	mu    *sync.Mutex
	done  *bool // protected by mu
	t     testkit.TB
	level slog.Level
	attrs []slog.Attr
}

func newTestLogger(t testkit.TB, level slog.Level) *slog.Logger {
	h := &testHandler{mu: new(sync.Mutex), done: new(bool), t: t, level: level}
	t.Cleanup(func() {
		h.mu.Lock()
		*h.done = true
		h.mu.Unlock()
	})
	return slog.New(h)
}

func (h *testHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *testHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String())
	b.WriteString(" ")
	b.WriteString(r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if !*h.done {
		h.t.Log(b.String())
	}
	return nil
}

func (h *testHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

func (h *testHandler) WithGroup(string) slog.Handler { return h }
