package natsstore

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
)

// Issue 23, item 3: leases that no live session explains hold their thread
// for Config.UnexplainedLeaseTTL from when they were stored, are listed by
// UnexplainedLeases, and are then taken like lapsed ones, reported in
// Lease.Reclaimed and counted. A writer with runner credentials wrote them
// straight to $KV.claims.<thread>.
func TestStore_unexplainedLeases(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	const ttl = 2 * time.Second
	s := open(t, srv, func(c *Config) { c.UnexplainedLeaseTTL = ttl })
	_, js := connect(t, srv)
	put := func(th string, data []byte, hdr nats.Header) {
		t.Helper()
		if _, err := js.PublishMsg(ctxT(t), &nats.Msg{Subject: "$KV.claims." + th, Data: data, Header: hdr}); err != nil {
			t.Fatal(err)
		}
	}
	lease := func(v *eventspb.Lease) []byte {
		b, err := proto.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	in2100 := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := map[string]string{
		"noTTL":     "no session and no server-side TTL",
		"farExpiry": "beyond its server-side TTL",
		"longTTL":   "is not within",
		"noSession": "names session nosuch, which does not exist",
		"garbage":   "does not decode",
	}
	put("noTTL", lease(&eventspb.Lease{Holder: "forger", ExpiresUnixNano: in2100.UnixNano(), TtlMs: 10_000}), nil)
	put("farExpiry", lease(&eventspb.Lease{Holder: "forger", ExpiresUnixNano: in2100.UnixNano(), TtlMs: 10_000}), nats.Header{"Nats-TTL": {"10s"}})
	put("longTTL", lease(&eventspb.Lease{Holder: "forger", ExpiresUnixNano: in2100.UnixNano(), TtlMs: 10_000}), nats.Header{"Nats-TTL": {"100000h"}})
	put("noSession", lease(&eventspb.Lease{Holder: "forger", Session: "nosuch"}), nil)
	put("garbage", []byte{0xff, 0xff}, nil)

	// A lease the protocol wrote is not listed.
	ss, err := s.OpenSession(ctxT(t), "honest", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireSessionLease(ctxT(t), "fine", "honest/1", ss); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireLease(ctxT(t), "ownTTL", "honest/2", 10*time.Second); err != nil {
		t.Fatal(err)
	}

	found, err := s.UnexplainedLeases(ctxT(t))
	if err != nil || len(found) != len(cases) {
		t.Fatalf("listed %+v %v, want the %d forged", found, err, len(cases))
	}
	for _, l := range found {
		if want, ok := cases[l.Thread]; !ok || !strings.Contains(l.Reason, want) || l.TakenAt.Sub(l.Stored) != ttl {
			t.Errorf("listed %+v, want reason %q", l, want)
		}
	}
	for th := range cases {
		_, err := s.AcquireSessionLease(ctxT(t), th, "honest/3", ss)
		if !errors.Is(err, events.ErrThreadBusy) || !strings.Contains(err.Error(), "explained by no live session") {
			t.Errorf("%s: acquire before the TTL: %v, want busy, unexplained", th, err)
		}
	}
	if n := s.LeasesReclaimed(); n != 0 {
		t.Fatalf("%d reclaimed before the TTL", n)
	}

	for th, want := range cases {
		testkit.CheckFor(t, 10*ttl, func() error {
			l, err := s.AcquireSessionLease(ctxT(t), th, "honest/3", ss)
			switch {
			case errors.Is(err, events.ErrThreadBusy):
				return err // not yet
			case err != nil || !strings.Contains(l.Reclaimed, want):
				t.Fatalf("%s: acquire after the TTL: %+v %v, want it reclaimed: %q", th, l, err, want)
			}
			return nil
		})
	}
	if n := s.LeasesReclaimed(); n != int64(len(cases)) {
		t.Errorf("%d reclaimed, want %d", n, len(cases))
	}
	if found, err := s.UnexplainedLeases(ctxT(t)); err != nil || len(found) != 0 {
		t.Errorf("after reclaiming: %+v %v, want none", found, err)
	}
}
