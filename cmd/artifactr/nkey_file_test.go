package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/artifactr/artifactr/internal/natsauth"
)

// Issue 23, item 7: the nkey files examples/nats/server.conf documents,
// `nk -gen user -pubout > runner.nk` (the seed on line 1, its public key on
// line 2, as nk prints them), work with --nkey: init as admin, post as
// client, audit as auditor, against a nats-server started with that config.
// A second line that is not the seed's public key is refused.
func TestRun_nkeyFileWithPublicKey(t *testing.T) {
	dir := t.TempDir()
	files := map[natsauth.Role]string{}
	for _, r := range natsauth.Roles {
		k, err := natsauth.NewKey(r)
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv(natsauth.EnvName(r), k.Public)
		files[r] = filepath.Join(dir, string(r)+".nk")
		// nk's output: log.Printf("%s", seed), then the public key.
		if err := os.WriteFile(files[r], fmt.Appendf(nil, "%s\n%s\n", k.Seed, k.Public), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opts, err := server.ProcessConfigFile(filepath.Join("..", "..", "examples", "nats", "server.conf"))
	if err != nil {
		t.Fatal(err)
	}
	opts.Host, opts.Port = "127.0.0.1", -1
	opts.StoreDir = t.TempDir()
	opts.NoSigs, opts.NoLog, opts.SyncAlways = true, true, false
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10e9) {
		t.Fatal("nats-server not ready")
	}
	url := ns.ClientURL()
	for _, args := range [][]string{
		{"init", "--nkey", files[natsauth.Admin]},
		{"post", "t1", "hi", "--nkey", files[natsauth.Client]},
		{"audit", "--nkey", files[natsauth.Auditor]},
	} {
		if code, out, errOut := runCLI(t, t.Context(), append(args, "--nats", url)...); code != exitOK {
			t.Errorf("%s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	other, err := natsauth.NewKey(natsauth.Client)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := os.ReadFile(files[natsauth.Client])
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "mismatched.nk")
	if err := os.WriteFile(bad, fmt.Appendf(nil, "%s\n%s\n", strings.Fields(string(seed))[0], other.Public), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, t.Context(), "post", "t1", "hi", "--nkey", bad, "--nats", url)
	if code == exitOK || !strings.Contains(errOut, "line 2 is not the public key") {
		t.Errorf("mismatched public key: exit %d\n%s", code, errOut)
	}
}
