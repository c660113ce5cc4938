package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/spf13/cobra"

	agentexec "github.com/artifactr/artifactr/actors/agent/exec"
	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/httpapi"
	"github.com/artifactr/artifactr/internal/natsauth"
	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/projections/summaries"
)

// Environment variables of the credential flags.
const (
	envNKey  = "ARTIFACTR_NKEY"
	envCreds = "ARTIFACTR_CREDS"
)

// secFlags are the credential and TLS flags of every command that talks to
// NATS. For serve with an embedded server, the TLS files are the server's.
type secFlags struct {
	nkey, creds            string
	tlsCert, tlsKey, tlsCA string
	// key, when set, is the nkey to log in with, in place of --nkey:
	// serve's own users of its embedded server.
	key *natsauth.Key
	// inProcess connects to this embedded server without a socket.
	inProcess *natsembed.Server
}

func addSecFlags(cmd *cobra.Command, s *secFlags) {
	fl := cmd.Flags()
	fl.StringVar(&s.nkey, "nkey", os.Getenv(envNKey), "file holding the user nkey seed to log in with, as in DATA/auth/client.nk (env "+envNKey+")")
	fl.StringVar(&s.creds, "creds", os.Getenv(envCreds), "NATS JWT credentials file, for operator-mode clusters (env "+envCreds+")")
	fl.StringVar(&s.tlsCert, "tls-cert", "", "TLS certificate (PEM): the client's, or with serve the embedded server's")
	fl.StringVar(&s.tlsKey, "tls-key", "", "key of --tls-cert (PEM)")
	fl.StringVar(&s.tlsCA, "tls-ca", "", "CA (PEM) that signed the server's certificate; with serve, the CA client certificates must be signed by")
}

func (s *secFlags) validate() error {
	switch {
	case s.nkey != "" && s.creds != "":
		return usagef("--nkey and --creds: give one")
	case (s.tlsCert == "") != (s.tlsKey == ""):
		return usagef("--tls-cert and --tls-key go together")
	}
	return nil
}

// natsOptions are the connect options the flags ask for.
func (s *secFlags) natsOptions() ([]nats.Option, error) {
	var o []nats.Option
	if s.inProcess != nil {
		o = append(o, nats.InProcessServer(s.inProcess.NATS()))
	}
	switch {
	case s.key != nil:
		o = append(o, nkeyOption(*s.key))
	case s.nkey != "":
		k, err := natsauth.ReadSeedFile(s.nkey)
		if err != nil {
			return nil, usagef("--nkey: %v", err)
		}
		o = append(o, nkeyOption(k))
	case s.creds != "":
		if _, err := os.Stat(s.creds); err != nil {
			return nil, usagef("--creds: %v", err)
		}
		o = append(o, nats.UserCredentials(s.creds))
	}
	if s.inProcess != nil {
		return o, nil // no socket, no TLS
	}
	if s.tlsCA != "" {
		o = append(o, nats.RootCAs(s.tlsCA))
	}
	if s.tlsCert != "" {
		o = append(o, nats.ClientCert(s.tlsCert, s.tlsKey))
	}
	return o, nil
}

func nkeyOption(k natsauth.Key) nats.Option {
	seed := k.Seed
	return nats.Nkey(k.Public, func(nonce []byte) ([]byte, error) {
		kp, err := nkeys.FromSeed(seed)
		if err != nil {
			return nil, err
		}
		defer kp.Wipe()
		return kp.Sign(nonce)
	})
}

// authError explains a connection the server refused for its credentials.
func authError(url string, err error) error {
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) {
		return failf("NATS at %s refused the credentials: %v\nhint: pass --nkey FILE (serve --auth keeps DATA/auth/client.nk, auditor.nk, admin.nk) or --creds FILE", url, err)
	}
	if errors.Is(err, natsstore.ErrPermissionDenied) {
		return fail(err)
	}
	if msg := err.Error(); strings.Contains(msg, "x509:") || strings.Contains(msg, "tls:") {
		return failf("TLS with NATS at %s failed: %v\nhint: --tls-ca FILE trusts the server's CA; --tls-cert and --tls-key present a client certificate", url, err)
	}
	return nil
}

// isLoopback reports whether a listen address accepts only local clients.
func isLoopback(listen string) bool { return httpapi.IsLoopback(listen) }

// embeddedAuth is what serve --auth set up on its embedded server.
type embeddedAuth struct {
	runner natsauth.Key   // serve's own runner, only in memory
	admin  natsauth.Key   // serve creates the stream and buckets as admin
	files  []natsauth.Key // the seeds kept in DATA/auth
	conf   string
}

// authNames are the names the embedded server's permissions are for.
func (f *serveFlags) authNames() natsauth.Names {
	n := natsauth.DefaultNames()
	n.Stream = f.conn.stream
	n.Summaries = f.summaries
	n.Durables = []string{f.workQueue, summaries.DefaultDurable}
	n.Partitions = f.conn.partitions
	return n
}

// prepareAuth loads or creates the users' nkeys in dir/auth. The runner's
// key is made afresh in memory on each start: only this process runs as
// it, so no file is left for an agent or a backup to leak; the others are
// kept so that clients can log in across restarts.
func prepareAuth(dir string, names natsauth.Names) (*embeddedAuth, error) {
	if err := names.Validate(); err != nil {
		return nil, usage(err)
	}
	files, err := natsauth.LoadOrCreate(filepath.Join(dir, "auth"), natsauth.Client, natsauth.Auditor, natsauth.Admin)
	if err != nil {
		return nil, fail(err)
	}
	runner, err := natsauth.NewKey(natsauth.Runner)
	if err != nil {
		return nil, fail(err)
	}
	users := map[natsauth.Role]string{natsauth.Runner: runner.Public}
	ea := &embeddedAuth{runner: runner, files: files}
	for _, k := range files {
		users[k.Role] = k.Public
		if k.Role == natsauth.Admin {
			ea.admin = k
		}
	}
	ea.conf = natsauth.PermissionsConf(names) + natsauth.AuthorizationConf(users)
	return ea, nil
}

// adminSetup creates, as admin, the stream and the buckets the runner and
// the clients may only use: the lease bucket (natsstore.New), the
// summaries read model and the HTTP API's delayed posts.
// Buckets added later must be created here too, since a runner may not.
func (a *app) adminSetup(ctx context.Context, f *serveFlags, admin natsauth.Key) error {
	c := f.conn // embed pointed it at srv, in process
	c.key = &admin
	store, err := a.open(ctx, &c, f.replicas)
	if err != nil {
		return err
	}
	defer store.Close()
	if f.projector {
		if _, err := store.OpenBucket(ctx, f.summaries, true); err != nil {
			return storeError(c.url, err)
		}
	}
	if f.http.addr != "" {
		// The HTTP API's delayed runs (after_seconds): its client role
		// writes and drains the bucket but may not create it.
		if _, err := store.OpenBucket(ctx, client.DefaultDelayedBucket, true); err != nil {
			return storeError(c.url, err)
		}
	}
	return nil
}

func (a *app) printAuth(ea *embeddedAuth) {
	fmt.Fprintln(a.stdout, "artifactr serve: auth on: clients log in with an nkey seed (mode 0600):")
	for _, k := range ea.files {
		fmt.Fprintf(a.stdout, "artifactr serve:   %-7s --nkey %s\n", k.Role, k.Path)
	}
}

// printSecurity says how clients get in.
func (a *app) printSecurity(f *serveFlags, ea *embeddedAuth) {
	if f.conn.tlsCert != "" {
		verify := "no client certificates"
		if f.conn.tlsCA != "" {
			verify = "client certificates signed by " + f.conn.tlsCA + " required"
		}
		fmt.Fprintf(a.stdout, "artifactr serve: TLS on (%s)\n", verify)
	}
	switch {
	case ea != nil:
		a.printAuth(ea)
	case !isLoopback(f.listen):
		fmt.Fprintf(a.stdout, "artifactr serve: warning: --auth=false on %s: anyone who reaches it can rewrite or delete the log\n", f.listen)
	}
}

// agentEnv splits --agent-env into KEY=VALUE pairs and names of serve's
// own variables. Naming a variable that holds NATS credentials is refused.
func agentEnv(flags []string) (env, pass []string, err error) {
	for _, v := range flags {
		name, _, hasValue := strings.Cut(v, "=")
		if name == "" {
			return nil, nil, usagef("--agent-env %q: want KEY or KEY=VALUE", v)
		}
		if agentexec.Secret(name) {
			return nil, nil, usagef("--agent-env %s: agents never get artifactr's or nats's settings (NATS URL, nkeys, creds)", name)
		}
		if hasValue {
			env = append(env, v)
		} else {
			pass = append(pass, name)
		}
	}
	return env, pass, nil
}

// durabilityNote is printed by serve on an external server: whether it
// fsyncs every write is in its /varz and /jsz, which only the system
// account may read, so artifactr cannot check it.
const durabilityNote = "artifactr serve: note: acknowledged events survive a power loss only if the NATS server fsyncs every write " +
	"(jetstream { sync_interval: always }); artifactr cannot read that setting from a client account, so check it (examples/nats/server.conf)"
