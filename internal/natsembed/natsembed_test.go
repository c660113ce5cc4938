package natsembed

import (
	"context"
	"errors"
	"fmt"
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

	"github.com/artifactr/artifactr/internal/testkit"
)

func TestRunForTest_jetStream_bigPayload(t *testing.T) {
	s := RunForTest(t)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got := nc.MaxPayload(); got != DefaultMaxPayload {
		t.Errorf("MaxPayload = %d, want %d", got, DefaultMaxPayload)
	}
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ctx, "s.a", make([]byte, 2<<20))
	if err != nil {
		t.Fatalf("publish 2 MiB: %v", err)
	}
	if ack.Sequence != 1 {
		t.Errorf("seq = %d", ack.Sequence)
	}
}

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

// TestCluster_stepDown creates an R3 stream, steps its leader down through
// the JetStream API, and checks that every acknowledged message survives and
// that writes continue under the new leader. It then restarts a follower
// with the same data directory and ports.
func TestCluster_StepDownStream_R3(t *testing.T) {
	c := StartCluster(t, 3)
	nc, err := nats.Connect(c.ClientURLs(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	old := c.WaitForStreamLeader("R3", 30*time.Second)
	publish := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			// Publishes around a leader change can time out with an unknown
			// outcome; the same msg id makes the retry safe.
			var err error
			for range 20 {
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				_, err = js.Publish(pctx, "r3.x", []byte(fmt.Sprint(i)), jetstream.WithMsgID(fmt.Sprint("m", i)))
				pcancel()
				if err == nil {
					break
				}
			}
			if err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
	}
	publish(0, 50)
	if err := StepDownStream(ctx, nc, "R3"); err != nil {
		t.Fatal(err)
	}
	var nl *Server
	testkit.WaitFor(t, 30*time.Second, "a new stream leader after step-down", func() (bool, string) {
		nl = c.StreamLeader("R3")
		return nl != nil && nl != old, "old leader " + old.Name()
	})
	t.Logf("stream leader %s -> %s", old.Name(), nl.Name())
	publish(50, 100)

	// Restart a follower as the same member.
	for i, n := range c.Nodes {
		if n != nl {
			c.Restart(i)
			break
		}
	}
	c.WaitForMetaLeader(30 * time.Second)
	publish(100, 120)
	st, err := js.Stream(ctx, "R3")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 120 {
		t.Errorf("stream has %d messages, want 120", info.State.Msgs)
	}
}

func TestStepDownStream_unknownStream(t *testing.T) {
	s := RunForTest(t)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = StepDownStream(ctx, nc, "NOPE")
	if err == nil {
		t.Fatal("step down of a missing stream succeeded")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("step down timed out: %v", err)
	}
}
