package natsembed_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/internal/natsauth"
	"github.com/artifactr/artifactr/internal/natsauth/authtest"
	"github.com/artifactr/artifactr/internal/natsembed"
)

func startWith(t *testing.T, cfg natsembed.Config) *natsembed.Server {
	t.Helper()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:-1"
	cfg.NoSync = true
	srv, err := natsembed.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

func roleKeys(t *testing.T) (map[natsauth.Role][]byte, string) {
	t.Helper()
	return roleKeysFor(t, natsauth.DefaultNames())
}

func roleKeysFor(t *testing.T, n natsauth.Names) (map[natsauth.Role][]byte, string) {
	t.Helper()
	seeds := map[natsauth.Role][]byte{}
	users := map[natsauth.Role]string{}
	for _, r := range natsauth.Roles {
		k, err := natsauth.NewKey(r)
		if err != nil {
			t.Fatal(err)
		}
		seeds[r], users[r] = k.Seed, k.Public
	}
	return seeds, natsauth.PermissionsConf(n) + natsauth.AccountConf(n, users)
}

// With four partitions every role may do on each partition's subjects and
// stream what it may with one, and nothing more of the writes.
func TestStart_authConfPartitioned(t *testing.T) {
	n := natsauth.DefaultNames()
	n.Partitions = 4
	seeds, conf := roleKeysFor(t, n)
	srv := startWith(t, natsembed.Config{AuthConf: conf})
	authtest.CheckCases(t, srv.ClientURL(), seeds, authtest.PartitionedMatrix())
}

// The embedded server with AuthConf enforces every role's permissions;
// the account has JetStream for its users.
func TestStart_authConf(t *testing.T) {
	seeds, conf := roleKeys(t)
	srv := startWith(t, natsembed.Config{AuthConf: conf})
	authtest.CheckNoAnonymous(t, srv.ClientURL())
	authtest.CheckMatrix(t, srv.ClientURL(), seeds)

	// Admin creates the stream; the runner may read it but not delete it.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	adminJS, err := jetstream.New(authtest.Connect(t, srv.ClientURL(), seeds[natsauth.Admin]))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adminJS.CreateStream(ctx, jetstream.StreamConfig{Name: "ARTIFACTR", Subjects: []string{"threads.>"}}); err != nil {
		t.Fatalf("admin creates the stream: %v", err)
	}
	rnc := authtest.Connect(t, srv.ClientURL(), seeds[natsauth.Runner])
	runnerJS, err := jetstream.New(rnc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runnerJS.Stream(ctx, "ARTIFACTR"); err != nil {
		t.Fatalf("runner reads stream info: %v", err)
	}
	dctx, dcancel := context.WithTimeout(ctx, time.Second)
	defer dcancel()
	if err := runnerJS.DeleteStream(dctx, "ARTIFACTR"); err == nil {
		t.Fatal("runner deleted the stream")
	}
	if last := rnc.LastError(); !errors.Is(last, nats.ErrPermissionViolation) || !strings.Contains(last.Error(), "STREAM.DELETE.ARTIFACTR") {
		t.Errorf("runner's delete: last error %v, want a permissions violation", last)
	}
	if _, err := adminJS.Stream(ctx, "ARTIFACTR"); err != nil {
		t.Errorf("the stream is gone: %v", err)
	}
}

func TestStart_authConfInvalid(t *testing.T) {
	_, err := natsembed.Start(natsembed.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", AuthConf: "accounts { A { users: [ {nkey: NOTAKEY} ] } }"})
	if err == nil {
		t.Fatal("started with an invalid nkey")
	}
	_, err = natsembed.Start(natsembed.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", AuthConf: "debug: false"})
	if err == nil || !strings.Contains(err.Error(), "defines no users") {
		t.Fatalf("AuthConf without users: %v", err)
	}
}

// With TLS and a CA, clients need a certificate signed by the CA and must
// trust the server's; in-process connections need neither.
func TestStart_tls(t *testing.T) {
	f := authtest.WriteTLS(t)
	srv := startWith(t, natsembed.Config{TLS: natsembed.TLSFiles{Cert: f.ServerCert, Key: f.ServerKey, CA: f.CA}})
	url := srv.ClientURL()
	nc, err := nats.Connect(url, nats.RootCAs(f.CA), nats.ClientCert(f.ClientCert, f.ClientKey), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("TLS client with a certificate: %v", err)
	}
	if !nc.TLSRequired() {
		t.Error("connection is not TLS")
	}
	nc.Close()
	if nc, err := nats.Connect(url, nats.RootCAs(f.CA), nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Error("a client without a certificate got in")
	}
	if nc, err := nats.Connect(url, nats.ClientCert(f.ClientCert, f.ClientKey), nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Error("a client that does not trust the CA got in")
	}
	// A tls:// URL would make the client start TLS on the pipe.
	inproc := strings.Replace(url, "tls://", "nats://", 1)
	if nc, err := nats.Connect(inproc, nats.InProcessServer(srv.NATS())); err != nil {
		t.Errorf("in-process connection: %v", err)
	} else {
		nc.Close()
	}
	if _, err := natsembed.Start(natsembed.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", TLS: natsembed.TLSFiles{Cert: f.ServerCert}}); err == nil {
		t.Error("started with a certificate and no key")
	}
}
