package natsstore

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/natsauth"
	"github.com/artifactr/artifactr/internal/natsembed"
)

// authServer starts a server with artifactr's roles and returns it with
// the connect option of each role.
func authServer(t *testing.T) (*natsembed.Server, map[natsauth.Role]nats.Option) {
	t.Helper()
	opts := map[natsauth.Role]nats.Option{}
	users := map[natsauth.Role]string{}
	for _, r := range natsauth.Roles {
		k, err := natsauth.NewKey(r)
		if err != nil {
			t.Fatal(err)
		}
		users[r] = k.Public
		seed := k.Seed
		opts[r] = nats.Nkey(k.Public, func(nonce []byte) ([]byte, error) {
			kp, err := nkeys.FromSeed(seed)
			if err != nil {
				return nil, err
			}
			return kp.Sign(nonce)
		})
	}
	n := natsauth.DefaultNames()
	srv, err := natsembed.Start(natsembed.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", NoSync: true,
		AuthConf: natsauth.PermissionsConf(n) + natsauth.AccountConf(n, users)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv, opts
}

// A write the user may not make fails with ErrPermissionDenied, naming the
// subject; it is not mistaken for an unknown outcome or an unreachable
// server.
func TestStore_permissionDenied(t *testing.T) {
	srv, role := authServer(t)
	as := func(r natsauth.Role) func(*Config) {
		return func(c *Config) { c.ConnectOptions = []nats.Option{role[r]}; c.Timeout = 4 * time.Second }
	}
	// Only the admin may create the stream.
	_, err := New(ctxT(t), Config{URL: srv.ClientURL(), ConnectOptions: []nats.Option{role[natsauth.Runner]}, Timeout: 2 * time.Second})
	if !errors.Is(err, ErrPermissionDenied) || errors.Is(err, events.ErrUnavailable) || !strings.Contains(err.Error(), "STREAM.CREATE") {
		t.Fatalf("New as runner on a fresh server: %v; want ErrPermissionDenied for STREAM.CREATE", err)
	}
	open(t, srv, as(natsauth.Admin))

	auditor := open(t, srv, as(natsauth.Auditor))
	_, err = auditor.Post(ctxT(t), "T", &eventspb.MessagePosted{MessageId: "m1", Text: "hi"})
	if !errors.Is(err, ErrPermissionDenied) || errors.Is(err, events.ErrUnavailable) || !strings.Contains(err.Error(), "threads.T.posted") ||
		!strings.Contains(err.Error(), "$KV.message_ids.T.m1") {
		t.Errorf("post as auditor: %v; want ErrPermissionDenied naming threads.T.posted and its id key", err)
	}

	client := open(t, srv, as(natsauth.Client))
	post(t, client, "T", "m1")
	forged := &eventspb.Event{Thread: "T", ClaimSeq: 1, Holder: "x",
		Body: &eventspb.Event_RunCompleted{RunCompleted: &eventspb.RunCompleted{RunId: "r1"}}}
	if _, err := client.Append(ctxT(t), forged, events.ExpectLast(0)); !errors.Is(err, ErrPermissionDenied) {
		t.Errorf("run_completed as client: %v; want ErrPermissionDenied", err)
	}
}

// A client may create consumers, and a push consumer delivers to any
// subject, the claim subject included: its deliveries reach core
// subscribers there but are not stored in the stream, so a client cannot
// move a claim subject's sequence (and fence out its holder) that way.
// This holds by nats-server's behaviour; the test guards it across
// upgrades.
func TestStore_pushConsumerCannotWriteStream(t *testing.T) {
	srv, role := authServer(t)
	as := func(r natsauth.Role) func(*Config) {
		return func(c *Config) { c.ConnectOptions = []nats.Option{role[r]} }
	}
	admin := open(t, srv, as(natsauth.Admin))
	if _, err := admin.openBucket(ctxT(t), "thread_summaries", true); err != nil {
		t.Fatal(err)
	}
	b, err := open(t, srv, as(natsauth.Runner)).openBucket(ctxT(t), "thread_summaries", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, errs := b.PutMany(ctxT(t), []events.KVPut{{Key: "T", Value: []byte(`{}`)}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	client := open(t, srv, as(natsauth.Client)).Conn()
	sub, err := client.SubscribeSync("threads.T.claim")
	if err != nil {
		t.Fatal(err)
	}
	req := `{"stream_name":"KV_thread_summaries","config":{"name":"inject","deliver_subject":"threads.T.claim","deliver_policy":"all","ack_policy":"none"}}`
	if _, err := client.Request("$JS.API.CONSUMER.CREATE.KV_thread_summaries.inject", []byte(req), 5*time.Second); err != nil {
		t.Fatalf("create push consumer: %v", err)
	}
	if _, err := sub.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("the push consumer delivered nothing: %v", err)
	}
	if err := client.Flush(); err != nil {
		t.Fatal(err)
	}
	if last, err := admin.LastSeq(ctxT(t), "T", events.KindClaim); err != nil || last != 0 {
		t.Fatalf("threads.T.claim last seq %d (%v): a push consumer wrote into the stream", last, err)
	}
}
