package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/artifactr/artifactr/internal/natsauth"
)

// operatorServer starts a nats-server in operator (JWT) mode with one
// account holding JetStream, and writes a creds file per role whose user
// JWT carries that role's permissions.
func operatorServer(t *testing.T) (url string, creds map[natsauth.Role]string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	okp, err := nkeys.CreateOperator()
	must(err)
	opub, _ := okp.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "test-operator"
	ojwt, err := oc.Encode(okp)
	must(err)
	oclaims, err := jwt.DecodeOperatorClaims(ojwt)
	must(err)

	akp, err := nkeys.CreateAccount()
	must(err)
	apub, _ := akp.PublicKey()
	ac := jwt.NewAccountClaims(apub)
	ac.Name = "ARTIFACTR"
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1, MaxAckPending: -1}
	ajwt, err := ac.Encode(okp)
	must(err)

	// Operator mode wants a system account.
	skp, err := nkeys.CreateAccount()
	must(err)
	spub, _ := skp.PublicKey()
	sc := jwt.NewAccountClaims(spub)
	sc.Name = "SYS"
	sjwt, err := sc.Encode(okp)
	must(err)

	resolver := &server.MemAccResolver{}
	must(resolver.Store(apub, ajwt))
	must(resolver.Store(spub, sjwt))
	opts := &server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		TrustedOperators: []*jwt.OperatorClaims{oclaims}, AccountResolver: resolver,
		SystemAccount: spub, NoSigs: true, NoLog: true,
		MaxControlLine: 16 << 10, // as examples/nats/server.conf says: the roles' JWTs pass 4 KB
	}
	ns, err := server.NewServer(opts)
	must(err)
	go ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("operator-mode nats-server not ready")
	}

	dir := t.TempDir()
	creds = map[natsauth.Role]string{}
	names := natsauth.DefaultNames()
	for _, r := range natsauth.Roles {
		ukp, err := nkeys.CreateUser()
		must(err)
		upub, _ := ukp.PublicKey()
		useed, _ := ukp.Seed()
		uc := jwt.NewUserClaims(upub)
		uc.Name = string(r)
		if p, ok := names.Permissions(r); ok {
			uc.Permissions.Pub.Allow.Add(p.PubAllow...)
			uc.Permissions.Pub.Deny.Add(p.PubDeny...)
			uc.Permissions.Sub.Allow.Add(p.SubAllow...)
			uc.Permissions.Sub.Deny.Add(p.SubDeny...)
		}
		ujwt, err := uc.Encode(akp)
		must(err)
		file, err := jwt.FormatUserConfig(ujwt, useed)
		must(err)
		path := filepath.Join(dir, string(r)+".creds")
		must(os.WriteFile(path, file, 0o600))
		creds[r] = path
	}
	return ns.ClientURL(), creds
}

// --creds logs in with NATS JWT credentials on an operator-mode server,
// where the roles' permissions sit in the user JWTs: admin inits, a runner
// serves, a client posts, an auditor audits and may not post.
func TestRun_credsOperatorMode(t *testing.T) {
	url, creds := operatorServer(t)
	ctx := t.Context()
	as := func(r natsauth.Role) []string { return []string{"--nats", url, "--creds", creds[r], "--timeout", "2s"} }
	if code, stdout, errOut := runCLI(t, ctx, append([]string{"init"}, as(natsauth.Admin)...)...); code != exitOK {
		t.Fatalf("init as admin: exit %d\n%s\n%s", code, stdout, errOut)
	}
	startServeArgs(t, append([]string{"--claim-ttl", "2s"}, as(natsauth.Runner)...)...)
	code, stdout, errOut := runCLI(t, ctx, append([]string{"post", "t1", "hello", "--wait"}, as(natsauth.Client)...)...)
	if code != exitOK || !strings.Contains(stdout, "echo: hello") {
		t.Errorf("post as client: exit %d\n%s\n%s", code, stdout, errOut)
	}
	if code, stdout, _ := runCLI(t, ctx, append([]string{"audit"}, as(natsauth.Auditor)...)...); code != exitOK {
		t.Errorf("audit as auditor: exit %d\n%s", code, stdout)
	}
	code, _, errOut = runCLI(t, ctx, append([]string{"post", "t1", "no"}, as(natsauth.Auditor)...)...)
	if code != exitFail || !strings.Contains(errOut, "permission denied") {
		t.Errorf("post as auditor: exit %d\n%s", code, errOut)
	}
	code, _, errOut = runCLI(t, ctx, "threads", "--nats", url, "--creds", filepath.Join(t.TempDir(), "missing.creds"))
	if code != exitUsage || !strings.Contains(errOut, "--creds") {
		t.Errorf("missing creds file: exit %d\n%s", code, errOut)
	}
}
