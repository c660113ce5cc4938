package natsstore

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

func TestStore_New_createsSafeStream(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	_, js := connect(t, srv)
	st, err := js.Stream(ctxT(t), DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	c := st.CachedInfo().Config
	if !c.DenyDelete || !c.DenyPurge || c.AllowRollup || c.AllowMsgTTL || c.MaxAge != 0 ||
		!c.AllowAtomicPublish || c.Storage != jetstream.FileStorage || c.Duplicates != DefaultDuplicateWindow ||
		len(c.Subjects) != 1 || c.Subjects[0] != "threads.>" || c.Replicas != 1 {
		t.Errorf("stream config %+v is not the audit-log config", c)
	}
	kv, err := js.Stream(ctxT(t), "KV_"+DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	if kc := kv.CachedInfo().Config; !kc.AllowMsgTTL || kc.SubjectDeleteMarkerTTL <= 0 {
		t.Errorf("bucket stream %+v has no per-key TTL", kc)
	}
	if got, want := s.MaxEventBytes(), events.DefaultMaxEventBytes; got != want {
		t.Errorf("MaxEventBytes = %d, want %d", got, want)
	}
	// A second store checks and accepts what the first created.
	open(t, srv)
}

func TestStore_New_refusesUnsafeStream(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	_, js := connect(t, srv)
	safe := func(name string) jetstream.StreamConfig {
		return jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, DenyDelete: true, DenyPurge: true}
	}
	cases := []struct {
		name string
		mod  func(*jetstream.StreamConfig)
		want string
	}{
		{"deletes", func(c *jetstream.StreamConfig) { c.DenyDelete = false }, "deletes allowed"},
		{"purges", func(c *jetstream.StreamConfig) { c.DenyPurge = false }, "purges allowed"},
		{"rollup", func(c *jetstream.StreamConfig) { c.AllowRollup, c.DenyPurge = true, false }, "rollups allowed"},
		{"ttl", func(c *jetstream.StreamConfig) { c.AllowMsgTTL = true }, "per-message TTL"},
		{"maxage", func(c *jetstream.StreamConfig) { c.MaxAge = time.Hour }, "max age"},
		{"perSubject", func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 1 }, "drop events"},
		{"subjects", func(c *jetstream.StreamConfig) { c.Subjects = append(c.Subjects, "other-"+c.Name+".>") }, "subjects"},
		{"workqueue", func(c *jetstream.StreamConfig) { c.Retention = jetstream.WorkQueuePolicy }, "retention"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "unsafe" + tc.name
			cfg := safe(name)
			tc.mod(&cfg)
			if _, err := js.CreateStream(ctxT(t), cfg); err != nil {
				t.Fatal(err)
			}
			_, err := New(ctxT(t), Config{URL: srv.ClientURL(), Stream: name, Prefix: name, Bucket: name})
			if !errors.Is(err, events.ErrUnsafeConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New on a stream with %s: %v, want events.ErrUnsafeConfig naming %q", tc.name, err, tc.want)
			}
			st, err := js.Stream(ctxT(t), name)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.CachedInfo().Config; got.DenyDelete != cfg.DenyDelete || got.AllowRollup != cfg.AllowRollup || got.MaxAge != cfg.MaxAge {
				t.Fatalf("New changed the stream: %+v", got)
			}
		})
	}
	t.Run("bucketWithoutTTL", func(t *testing.T) {
		if _, err := js.CreateKeyValue(ctxT(t), jetstream.KeyValueConfig{Bucket: "nottl"}); err != nil {
			t.Fatal(err)
		}
		_, err := New(ctxT(t), Config{URL: srv.ClientURL(), Stream: "okstream", Prefix: "okprefix", Bucket: "nottl"})
		if !errors.Is(err, events.ErrUnsafeConfig) || !strings.Contains(err.Error(), "per-key TTL") {
			t.Fatalf("New on a bucket without TTL: %v", err)
		}
	})
}

// TestNew_unreachable: a URL nobody listens on fails fast, names the URL and
// wraps ErrUnavailable.
func TestStore_New_unreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	l.Close()
	start := time.Now()
	_, err = New(ctxT(t), Config{URL: url, Timeout: 2 * time.Second})
	if !errors.Is(err, events.ErrUnavailable) || !strings.Contains(err.Error(), url) {
		t.Fatalf("New(%s): %v, want ErrUnavailable naming the URL", url, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("New took %s, want within the 2s bound", d)
	}
	t.Log(err)
}

func TestConfig_validate_badConfigs(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	nc, _ := connect(t, srv)
	bad := []Config{
		{},
		{URL: srv.ClientURL(), Conn: nc},
		{URL: srv.ClientURL(), Stream: "a.b"},
		{URL: srv.ClientURL(), Prefix: "a.b"},
		{URL: srv.ClientURL(), Bucket: "a b"},
		{URL: srv.ClientURL(), Replicas: 7},
		{URL: srv.ClientURL(), Timeout: -time.Second},
	}
	for i, c := range bad {
		if s, err := New(ctxT(t), c); err == nil {
			s.Close()
			t.Errorf("config %d %+v accepted", i, c)
		}
	}
	// A borrowed connection is not closed by the store.
	s, err := New(ctxT(t), Config{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if nc.IsClosed() {
		t.Fatal("Close closed a connection the store did not open")
	}
	if _, err := s.LastSeq(ctxT(t), "T", events.KindRun); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("LastSeq after Close: %v, want ErrClosed", err)
	}
}

func TestServerTTL_roundsUp(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{time.Millisecond, time.Second},
		{time.Second, time.Second},
		{1001 * time.Millisecond, 2 * time.Second},
		{10 * time.Second, 10 * time.Second},
	} {
		if got := serverTTL(tc.in); got != tc.want {
			t.Errorf("serverTTL(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// A server with a small max payload lowers the event limit, and a message
// whose headers push it over is refused as too large, not as unknown.
func TestStore_New_smallMaxPayload(t *testing.T) {
	srv, err := natsembed.Start(natsembed.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", NoSync: true, MaxPayload: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	s := open(t, srv)
	if got, want := s.MaxEventBytes(), 64<<10-headerRoom; got != want {
		t.Fatalf("MaxEventBytes = %d, want %d", got, want)
	}
	_, err = s.Post(ctxT(t), "T", &eventspb.MessagePosted{Text: strings.Repeat("x", 61<<10)})
	if !errors.Is(err, events.ErrTooLarge) {
		t.Fatalf("post over the lowered limit: %v", err)
	}
	// Message ids are at most 128 characters, so they cannot push the
	// headers past the room kept for them.
	_, err = s.Post(ctxT(t), "T", &eventspb.MessagePosted{MessageId: strings.Repeat("i", 20<<10), Text: strings.Repeat("x", 50<<10)})
	if !errors.Is(err, events.ErrInvalidEvent) || errors.Is(err, events.ErrUnavailable) {
		t.Fatalf("post with a 20 KiB message id: %v, want ErrInvalidEvent", err)
	}
	if n := lastSeq(t, s, "T", events.KindPosted); n != 0 {
		t.Fatalf("refused posts stored seq %d", n)
	}
}

// TestStore_New_noCreate: with NoCreate, New on a server without the stream
// fails with ErrNoStream naming the stream and the server, and creates
// nothing; on a set-up server it opens what is there.
func TestStore_New_noCreate(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	_, js := connect(t, srv)
	_, err := New(ctxT(t), Config{URL: srv.ClientURL(), NoCreate: true})
	if !errors.Is(err, ErrNoStream) || errors.Is(err, events.ErrUnavailable) {
		t.Fatalf("New(NoCreate) on an empty server: %v, want ErrNoStream", err)
	}
	for _, want := range []string{DefaultStream, srv.ClientURL()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	names := js.StreamNames(ctxT(t))
	for n := range names.Name() {
		t.Errorf("New(NoCreate) created stream %s", n)
	}
	if names.Err() != nil {
		t.Fatal(names.Err())
	}

	open(t, srv) // sets the server up
	s := open(t, srv, func(c *Config) { c.NoCreate = true })
	if _, err := s.Post(ctxT(t), "T", &eventspb.MessagePosted{Text: "hi"}); err != nil {
		t.Fatalf("post through a NoCreate store on a set-up server: %v", err)
	}
	_, err = New(ctxT(t), Config{URL: srv.ClientURL(), Stream: "NOPE", NoCreate: true})
	if !errors.Is(err, ErrNoStream) || !strings.Contains(err.Error(), "NOPE") {
		t.Fatalf("New(NoCreate, Stream NOPE): %v, want ErrNoStream naming NOPE", err)
	}

	// A stream without its lease bucket is not set up either.
	_, err = New(ctxT(t), Config{URL: srv.ClientURL(), Bucket: "other", NoCreate: true})
	if !errors.Is(err, ErrNoStream) || !strings.Contains(err.Error(), "other") {
		t.Fatalf("New(NoCreate, Bucket other): %v, want ErrNoStream naming the bucket", err)
	}
	if _, err := js.KeyValue(ctxT(t), "other"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("New(NoCreate) created bucket other: %v", err)
	}
}
