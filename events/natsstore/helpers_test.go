package natsstore

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/natsembed"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// open opens a store on srv, closed when t ends.
func open(t testing.TB, srv *natsembed.Server, mod ...func(*Config)) *Store {
	t.Helper()
	cfg := Config{URL: srv.ClientURL()}
	for _, m := range mod {
		m(&cfg)
	}
	s, err := New(ctxT(t), cfg)
	if err != nil {
		t.Fatalf("natsstore.New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func connect(t testing.TB, srv *natsembed.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func post(t testing.TB, s events.Store, thread, id string) uint64 {
	t.Helper()
	ack, err := s.Post(ctxT(t), thread, &eventspb.MessagePosted{MessageId: id, Author: "test", Text: "hello " + id})
	if err != nil {
		t.Fatalf("post %s/%s: %v", thread, id, err)
	}
	return ack.Seq
}

func claim(t testing.TB, s events.Store, thread, holder string) events.Claim {
	t.Helper()
	c, _, err := events.AcquireClaim(ctxT(t), s, thread, holder, 10*time.Second, time.Now())
	if err != nil {
		t.Fatalf("claim %s by %s: %v", thread, holder, err)
	}
	return c
}

// newerClaim appends a claim marker after c's, as a takeover does, without
// touching the lease.
func newerClaim(t testing.TB, s events.Store, c events.Claim, holder string) uint64 {
	t.Helper()
	ev := &eventspb.Event{Thread: c.Thread, Holder: holder, Body: &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{Holder: holder}}}
	ack, err := s.Append(ctxT(t), ev, events.ExpectLast(c.Seq))
	if err != nil {
		t.Fatalf("newer claim on %s: %v", c.Thread, err)
	}
	return ack.Seq
}

func load(t testing.TB, s events.Store, thread string) []events.Envelope {
	t.Helper()
	envs, err := s.Load(ctxT(t), thread, 1)
	if err != nil {
		t.Fatalf("load %s: %v", thread, err)
	}
	return envs
}

func lastSeq(t testing.TB, s events.Store, thread string, k events.Kind) uint64 {
	t.Helper()
	n, err := s.LastSeq(ctxT(t), thread, k)
	if err != nil {
		t.Fatalf("last seq %s %s: %v", thread, k, err)
	}
	return n
}

func streamMsgs(t testing.TB, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	st, err := js.Stream(ctxT(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// restartable starts a server on a fixed loopback port and a data dir of
// its own, so that natsembed.Start(cfg) brings it back where clients
// reconnect. It is shut down at the test's end.
func restartable(t *testing.T) (natsembed.Config, *natsembed.Server) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := natsembed.Config{DataDir: t.TempDir(), Listen: addr, NoSync: true}
	srv, err := natsembed.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown() })
	return cfg, srv
}

// publishRaw returns an eventstest.Harness PublishRaw that writes with no
// checks, as a forger with publish rights would.
func publishRaw(js jetstream.JetStream) func(*testing.T, string, events.Header, []byte) {
	return func(t *testing.T, subject string, h events.Header, data []byte) {
		if _, err := js.PublishMsg(ctxT(t), &nats.Msg{Subject: subject, Header: nats.Header(h), Data: data}); err != nil {
			t.Fatalf("publish raw to %s: %v", subject, err)
		}
	}
}
