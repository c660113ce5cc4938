// Package authtest checks a running nats-server's permissions against the
// roles of package natsauth, for tests.
package authtest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/artifactr/artifactr/internal/natsauth"
)

// Case is one publish and the roles allowed to make it.
type Case struct {
	Subject string
	Allowed []natsauth.Role
	// Destructive: do not probe it with a role that is allowed, since the
	// server would carry it out (delete the stream, say).
	Destructive bool
}

var (
	all     = []natsauth.Role{natsauth.Runner, natsauth.Client, natsauth.Auditor, natsauth.Admin}
	runners = []natsauth.Role{natsauth.Runner, natsauth.Admin}
	admins  = []natsauth.Role{natsauth.Admin}
)

// Matrix is what each role may publish, for the default names: the
// attacks of issue 10 and the requests the code needs.
func Matrix() []Case {
	return []Case{
		{Subject: "threads.t1.posted", Allowed: []natsauth.Role{natsauth.Client, natsauth.Admin}},
		{Subject: "threads.t1.claim", Allowed: runners},
		{Subject: "threads.t1.run", Allowed: runners},
		{Subject: "threads.t1.guard", Allowed: runners}, // a guarded write's guard
		{Subject: "$KV.claims.t1", Allowed: runners},
		{Subject: "$KV.claims.session.r1", Allowed: runners},
		{Subject: "$KV.claims._partition.0", Allowed: runners}, // partition leases (events.PartitionKey)
		{Subject: "$KV.thread_summaries.t1", Allowed: runners},
		{Subject: "$KV.thread_snapshots.t1", Allowed: runners},
		{Subject: "$KV.message_firsts.t1.m1", Allowed: runners}, // the first-post index: written once
		{Subject: "$JS.API.DIRECT.GET.KV_message_firsts.$KV.message_firsts.t1.m1", Allowed: all},
		{Subject: "$JS.API.STREAM.MSG.GET.KV_message_firsts", Allowed: all},
		{Subject: "$JS.API.STREAM.PURGE.KV_message_firsts", Allowed: admins, Destructive: true},
		{Subject: "$JS.API.STREAM.CREATE.ARTIFACTR", Allowed: admins, Destructive: true},
		{Subject: "$JS.API.STREAM.UPDATE.ARTIFACTR", Allowed: admins, Destructive: true},
		{Subject: "$JS.API.STREAM.DELETE.ARTIFACTR", Allowed: admins, Destructive: true},
		{Subject: "$JS.API.STREAM.PURGE.ARTIFACTR", Allowed: admins, Destructive: true},
		{Subject: "$JS.API.STREAM.MSG.DELETE.ARTIFACTR", Allowed: admins, Destructive: true},
		{Subject: "$JS.API.STREAM.DELETE.KV_claims", Allowed: admins, Destructive: true},
		{Subject: "$JS.API.STREAM.UPDATE.KV_claims", Allowed: admins, Destructive: true},
		{Subject: "$JS.API.STREAM.PURGE.KV_thread_summaries", Allowed: admins, Destructive: true},
		{Subject: "$JS.API.STREAM.INFO.ARTIFACTR", Allowed: all},
		{Subject: "$JS.API.DIRECT.GET.KV_thread_summaries.$KV.thread_summaries.t1", Allowed: all},
		{Subject: "$JS.API.CONSUMER.CREATE.ARTIFACTR.probe.threads.>", Allowed: all},
		{Subject: "$JS.API.CONSUMER.CREATE.ARTIFACTR.artifactr-runners.threads.*.posted", Allowed: runners},
		{Subject: "$JS.API.CONSUMER.MSG.NEXT.ARTIFACTR.artifactr-runners", Allowed: runners},
		{Subject: "$JS.API.CONSUMER.DELETE.ARTIFACTR.summaries", Allowed: runners, Destructive: true},
		{Subject: "$JS.API.CONSUMER.RESET.ARTIFACTR.summaries", Allowed: runners, Destructive: true},
		{Subject: "$JS.ACK.ARTIFACTR.artifactr-runners.1.1.1.1.0", Allowed: runners},
	}
}

// PartitionedMatrix is what each role may publish, for the default names
// with four partitions (natsauth.Names.Partitions): thread t1 is in
// partition 2, its stream ARTIFACTR-p2.
func PartitionedMatrix() []Case {
	return []Case{
		{Subject: "threads.2.t1.posted", Allowed: []natsauth.Role{natsauth.Client, natsauth.Admin}},
		{Subject: "threads.2.t1.claim", Allowed: runners},
		{Subject: "threads.2.t1.run", Allowed: runners},
		{Subject: "threads.2.t1.guard", Allowed: runners},
		// The one-stream subjects are no layout's here: nobody but admin.
		{Subject: "threads.t1.claim", Allowed: admins},
		{Subject: "threads.t1.posted", Allowed: admins},
		{Subject: "$KV.claims.t1", Allowed: runners},
		{Subject: "$KV.thread_summaries.t1", Allowed: runners},
		{Subject: "$KV.message_firsts.t1.m1", Allowed: runners},
		{Subject: "$JS.API.DIRECT.GET.KV_message_firsts.$KV.message_firsts.t1.m1", Allowed: all},
		{Subject: "$JS.API.STREAM.CREATE.ARTIFACTR-p2", Allowed: admins, Destructive: true},
		{Subject: "$JS.API.STREAM.DELETE.ARTIFACTR-p2", Allowed: admins, Destructive: true},
		{Subject: "$JS.API.STREAM.PURGE.ARTIFACTR-p3", Allowed: admins, Destructive: true},
		{Subject: "$JS.API.STREAM.MSG.DELETE.ARTIFACTR-p0", Allowed: admins, Destructive: true},
		{Subject: "$JS.API.STREAM.PURGE.KV_thread_summaries", Allowed: admins, Destructive: true},
		{Subject: "$JS.API.STREAM.INFO.ARTIFACTR-p3", Allowed: all},
		{Subject: "$JS.API.DIRECT.GET.ARTIFACTR-p2", Allowed: all},
		{Subject: "$JS.API.DIRECT.GET.KV_thread_summaries.$KV.thread_summaries.t1", Allowed: all},
		{Subject: "$JS.API.CONSUMER.CREATE.ARTIFACTR-p1.probe.threads.1.>", Allowed: all},
		{Subject: "$JS.API.CONSUMER.CREATE.ARTIFACTR-p1.artifactr-runners.threads.1.*.posted", Allowed: runners},
		{Subject: "$JS.API.CONSUMER.DURABLE.CREATE.ARTIFACTR-p3.summaries", Allowed: runners},
		{Subject: "$JS.API.CONSUMER.MSG.NEXT.ARTIFACTR-p0.artifactr-runners", Allowed: runners},
		{Subject: "$JS.API.CONSUMER.MSG.NEXT.ARTIFACTR-p3.summaries", Allowed: runners},
		{Subject: "$JS.API.CONSUMER.DELETE.ARTIFACTR-p2.summaries", Allowed: runners, Destructive: true},
		{Subject: "$JS.API.CONSUMER.RESET.ARTIFACTR-p2.summaries", Allowed: runners, Destructive: true},
		{Subject: "$JS.ACK.ARTIFACTR-p1.artifactr-runners.1.1.1.1.0", Allowed: runners},
	}
}

// Connect dials url as a user with seed, with extra options.
func Connect(t testing.TB, url string, seed []byte, opts ...nats.Option) *nats.Conn {
	t.Helper()
	base := []nats.Option{
		nats.Nkey(mustPublic(t, seed), signer(seed)),
		nats.Timeout(5 * time.Second),
		// Refusals are what these tests expect; LastError reports them.
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
	}
	nc, err := nats.Connect(url, append(base, opts...)...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Probe publishes to subject on a fresh connection and reports whether
// the server refused it with a permissions violation. The server answers
// a PING after its -ERR, so a flushed publish that left no error was
// allowed.
func Probe(t testing.TB, url string, seed []byte, subject string, opts ...nats.Option) bool {
	t.Helper()
	nc := Connect(t, url, seed, opts...)
	defer nc.Close()
	if err := nc.Publish(subject, []byte("{}")); err != nil {
		t.Fatalf("publish %s: %v", subject, err)
	}
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		t.Fatalf("flush %s: %v", subject, err)
	}
	err := nc.LastError()
	if err == nil {
		return false
	}
	if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), fmt.Sprintf("%q", subject)) {
		return true
	}
	t.Fatalf("publish %s: unexpected error %v", subject, err)
	return false
}

// CheckMatrix probes every case of Matrix with every role whose seed is
// in seeds and fails t where the server disagrees with the matrix.
func CheckMatrix(t *testing.T, url string, seeds map[natsauth.Role][]byte, opts ...nats.Option) {
	t.Helper()
	CheckCases(t, url, seeds, Matrix(), opts...)
}

// CheckCases is CheckMatrix of cases.
func CheckCases(t *testing.T, url string, seeds map[natsauth.Role][]byte, cases []Case, opts ...nats.Option) {
	t.Helper()
	for _, c := range cases {
		for _, r := range natsauth.Roles {
			seed, ok := seeds[r]
			if !ok {
				continue
			}
			allowed := slices.Contains(c.Allowed, r)
			if allowed && c.Destructive {
				continue
			}
			if denied := Probe(t, url, seed, c.Subject, opts...); denied == allowed {
				t.Errorf("%s publishing %s: allowed=%v, want %v", r, c.Subject, !denied, allowed)
			}
		}
	}
}

// CheckNoAnonymous fails t unless a connection with no credentials is
// refused.
func CheckNoAnonymous(t testing.TB, url string, opts ...nats.Option) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err == nil {
		nc.Close()
		t.Fatalf("%s accepted a connection without credentials", url)
	}
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Logf("anonymous connection refused: %v", err)
	}
}
