package natsstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
)

// muxFor returns s's reply mux and a plain connection to its server.
func muxFor(t *testing.T) (*replyMux, *nats.Conn) {
	t.Helper()
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	g, err := s.mux()
	if err != nil {
		t.Fatal(err)
	}
	nc, _ := connect(t, srv)
	return g, nc
}

func pendingCalls(g *replyMux) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending)
}

// TestReplyMux_outcomes checks each way a request ends: its reply, every
// reply of a batch up to its status message, no responders, a timeout and
// its caller's end. None leaves a call pending, and a reply that comes too
// late is dropped.
func TestReplyMux_outcomes(t *testing.T) {
	g, nc := muxFor(t)
	ctx := ctxT(t)
	if _, err := nc.Subscribe("echo", func(m *nats.Msg) { _ = m.Respond(append([]byte("re:"), m.Data...)) }); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe("batch", func(m *nats.Msg) {
		for _, d := range []string{"a", "b"} {
			_ = nc.Publish(m.Reply, []byte(d))
		}
		_ = nc.PublishMsg(&nats.Msg{Subject: m.Reply, Header: nats.Header{hdrStatus: {"204"}}})
		_ = nc.Publish(m.Reply, []byte("after the end"))
	}); err != nil {
		t.Fatal(err)
	}
	late := make(chan string, 1)
	if _, err := nc.Subscribe("late", func(m *nats.Msg) { late <- m.Reply }); err != nil {
		t.Fatal(err)
	}
	// "never" answers nothing: its caller gives up when it reads the
	// request, which it can only once the request was sent.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if _, err := nc.Subscribe("never", func(*nats.Msg) { cancel() }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	msgs, err := g.request(ctx, &nats.Msg{Subject: "echo", Data: []byte("x")}, 5*time.Second, false)
	if err != nil || len(msgs) != 1 || string(msgs[0].Data) != "re:x" {
		t.Fatalf("echo: %d replies, %v", len(msgs), err)
	}

	msgs, err = g.request(ctx, &nats.Msg{Subject: "batch"}, 5*time.Second, true)
	if err != nil || len(msgs) != 3 || string(msgs[0].Data) != "a" || string(msgs[1].Data) != "b" || !isStatus(msgs[2]) {
		t.Fatalf("batch: %d replies, %v; want a, b and the end-of-batch status", len(msgs), err)
	}

	if _, err := g.request(ctx, &nats.Msg{Subject: "nobody.listens"}, 5*time.Second, false); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("no responders: %v, want nats.ErrNoResponders", err)
	}

	if _, err := g.request(ctx, &nats.Msg{Subject: "late"}, 50*time.Millisecond, false); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timeout: %v, want context.DeadlineExceeded", err)
	}
	// The reply to the request that gave up is dropped, and the mux still
	// answers the next one.
	if err := nc.Publish(<-late, []byte("too late")); err != nil {
		t.Fatal(err)
	}
	msgs, err = g.request(ctx, &nats.Msg{Subject: "echo", Data: []byte("y")}, 5*time.Second, false)
	if err != nil || string(msgs[0].Data) != "re:y" {
		t.Fatalf("echo after a late reply: %v", err)
	}

	if _, err := g.request(cctx, &nats.Msg{Subject: "never"}, time.Hour, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled caller: %v, want context.Canceled", err)
	}
	if _, err := g.request(cctx, &nats.Msg{Subject: "echo"}, time.Hour, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("request under an ended context: %v, want context.Canceled", err)
	}
	if n := pendingCalls(g); n != 0 {
		t.Fatalf("%d calls left pending", n)
	}
}

// TestStore_deadline checks that a store operation ends by the store's
// Timeout when its context has no deadline, and by the context's when that
// is sooner.
func TestStore_deadline(t *testing.T) {
	s := &Store{cfg: Config{Timeout: time.Minute}}
	now := time.Now()
	if d := s.deadline(context.Background()); d.Before(now.Add(time.Minute)) || d.After(time.Now().Add(time.Minute)) {
		t.Errorf("no context deadline: %s from now, want the Timeout", d.Sub(now))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	want, _ := ctx.Deadline()
	if d := s.deadline(ctx); !d.Equal(want) {
		t.Errorf("sooner context deadline: got %s, want %s", d, want)
	}
}

// TestAppend_boundedWithoutContextDeadline checks that an append whose
// context has no deadline still gives up by the store's Timeout when
// nothing answers it.
func TestAppend_boundedWithoutContextDeadline(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv, func(c *Config) { c.Timeout = 300 * time.Millisecond })
	post(t, s, "T", "m1")
	// Nothing answers any attempt.
	s.send = func(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	start := time.Now()
	_, err := s.Post(context.Background(), "T", &eventspb.MessagePosted{MessageId: "m2", Author: "a", Text: "hi"})
	if err == nil {
		t.Fatal("a post nobody answered succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want it to wrap context.DeadlineExceeded", err)
	}
	t.Logf("gave up after %s with %v", time.Since(start).Round(time.Millisecond), err)
}

// A batch whose connection was dropped and made again while its replies
// came may have lost any of them: the server sends replies to the inbox
// as it goes, and those sent while the client was away are gone, while
// the rest, the end-of-batch status among them, reach the new connection.
// Taken as complete, such a batch is a load that silently misses events:
// a claim then plans on a thread without its run events, and gives
// consumed messages out again. The request must fail instead.
func TestReplyMux_batchAcrossReconnect(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv, func(c *Config) {
		c.ConnectOptions = append(c.ConnectOptions, nats.ReconnectWait(10*time.Millisecond))
	})
	g, err := s.mux()
	if err != nil {
		t.Fatal(err)
	}
	nc, _ := connect(t, srv)
	asked := make(chan string, 1)
	if _, err := nc.Subscribe("split", func(m *nats.Msg) { asked <- m.Reply }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	type result struct {
		msgs []*nats.Msg
		err  error
	}
	done := make(chan result, 1)
	go func() {
		msgs, err := g.request(context.Background(), &nats.Msg{Subject: "split"}, 20*time.Second, true)
		done <- result{msgs, err}
	}()
	reply := <-asked
	// The first reply is sent while the client is away: drop it, reconnect.
	cid, err := g.nc.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.NATS().DisconnectClientByID(cid); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the reconnect", func() (bool, string) {
		return g.nc.Stats().Reconnects >= 1 && g.nc.IsConnected(), g.nc.Status().String()
	})
	if err := g.nc.Flush(); err != nil { // the inbox is subscribed again
		t.Fatal(err)
	}
	_ = nc.Publish(reply, []byte("second"))
	_ = nc.PublishMsg(&nats.Msg{Subject: reply, Header: nats.Header{hdrStatus: {"204"}}})
	r := <-done
	if r.err == nil {
		t.Fatalf("a batch across a reconnect returned %d replies and no error; its head may be lost", len(r.msgs))
	}
	t.Logf("refused as it should: %v", r.err)
}
