package natsembed

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestStart_portInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	dir := t.TempDir()
	_, err = Start(Config{DataDir: dir, Listen: addr, ReadyTimeout: 5 * time.Second})
	if !errors.Is(err, ErrListenInUse) {
		t.Fatalf("Start on a busy port: %v, want ErrListenInUse", err)
	}
	if !strings.Contains(err.Error(), addr) {
		t.Errorf("error %q does not name %s", err, addr)
	}
	// Checked before the store is opened: JetStream wrote nothing.
	if _, err := os.Stat(filepath.Join(dir, "jetstream")); !os.IsNotExist(err) {
		t.Errorf("the store was opened before the port was checked: %v", err)
	}
	// And the lock was given back.
	s, err := Start(Config{DataDir: dir, Listen: "127.0.0.1:-1", NoSync: true})
	if err != nil {
		t.Fatalf("Start after a failed one on the same directory: %v", err)
	}
	s.Shutdown()
}

// TestStart_dataDirLocked: a second server on a directory in use fails at
// once, naming the directory and the holder, and the first keeps serving
// what it acked; once the first stops, the directory is free again.
func TestStart_dataDirLocked(t *testing.T) {
	dir := t.TempDir()
	a, err := Start(Config{DataDir: dir, Listen: "127.0.0.1:-1", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	nc, err := nats.Connect(a.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "s.a", []byte("one")); err != nil {
		t.Fatal(err)
	}

	_, err = Start(Config{DataDir: dir, Listen: "127.0.0.1:-1", NoSync: true})
	if !errors.Is(err, ErrDataDirLocked) {
		t.Fatalf("second Start on %s: %v, want ErrDataDirLocked", dir, err)
	}
	for _, want := range []string{dir, "pid " + strconv.Itoa(os.Getpid())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	// The first server still serves, and its acked message is there.
	if _, err := js.Publish(ctx, "s.b", []byte("two")); err != nil {
		t.Fatalf("first server after the refused second: %v", err)
	}
	st, err := js.Stream(ctx, "S")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st.GetMsg(ctx, 1); err != nil || string(m.Data) != "one" {
		t.Fatalf("acked message 1: %v %q", err, m.Data)
	}
	nc.Close()
	a.Shutdown()

	b, err := Start(Config{DataDir: dir, Listen: "127.0.0.1:-1", NoSync: true})
	if err != nil {
		t.Fatalf("Start after the holder stopped: %v", err)
	}
	defer b.Shutdown()
	nc2, err := nats.Connect(b.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	js2, _ := jetstream.New(nc2)
	st2, err := js2.Stream(ctx, "S")
	if err != nil {
		t.Fatal(err)
	}
	if n := st2.CachedInfo().State.Msgs; n != 2 {
		t.Errorf("after restart the stream has %d messages, want 2", n)
	}
}

func TestStart_noDataDir(t *testing.T) {
	if _, err := Start(Config{}); err == nil {
		t.Fatal("Start without DataDir succeeded")
	}
}

// syncHandler records messages, for checking what Start logs.
type syncHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *syncHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *syncHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Level.String()+" "+r.Message)
	return nil
}
func (h *syncHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *syncHandler) WithGroup(string) slog.Handler      { return h }

func TestStart_noSyncWarns(t *testing.T) {
	h := new(syncHandler)
	s, err := Start(Config{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", NoSync: true, Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.Shutdown() // idempotent
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.msgs {
		if strings.HasPrefix(m, "WARN") && strings.Contains(m, "not fsynced") {
			return
		}
	}
	t.Errorf("no NoSync warning in %d log lines", len(h.msgs))
}

func TestStart_durableByDefault(t *testing.T) {
	s, err := Start(Config{DataDir: t.TempDir(), Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	if cfg := s.NATS().JetStreamConfig(); cfg == nil || !cfg.SyncAlways {
		t.Errorf("JetStream config %+v: want SyncAlways", cfg)
	}
}
