package main

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// Issue 23, item 3: audit --leases lists a lease no live session explains
// (one written straight to the bucket, expiring in 2100) and exits 1; with
// none it says so and exits 0.
func TestRun_auditLeases(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	url := srv.ClientURL()
	if code, _, errOut := runCLI(t, t.Context(), "post", "t1", "hi", "--nats", url); code != exitOK {
		t.Fatalf("post: exit %d: %s", code, errOut)
	}
	code, out, errOut := runCLI(t, t.Context(), "audit", "--leases", "--nats", url)
	if code != exitOK || !strings.Contains(out, "leases OK") {
		t.Fatalf("no forged lease: exit %d:\n%s%s", code, out, errOut)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	data, err := proto.Marshal(&eventspb.Lease{Holder: "forger", ExpiresUnixNano: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), TtlMs: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), "$KV.claims.t1", data); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, t.Context(), "audit", "--leases", "--nats", url)
	if code != exitFail || !strings.Contains(out, `thread t1: holder "forger"`) || !strings.Contains(out, "no session and no server-side TTL") {
		t.Errorf("forged lease: exit %d:\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, t.Context(), "audit", "--leases", "--json", "--nats", url)
	if code != exitFail || !strings.Contains(out, `"unexplained_leases"`) || !strings.Contains(out, `"thread": "t1"`) {
		t.Errorf("--json: exit %d:\n%s", code, out)
	}
	if code, _, _ := runCLI(t, t.Context(), "audit", "--leases", "--spec", "--nats", url); code != exitUsage {
		t.Errorf("--leases --spec: exit %d, want usage", code)
	}
}
