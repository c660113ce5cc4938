package natsembed

import (
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
)

// TLSFiles are PEM files for the server's client listener. Cert and Key
// are set together; CA, when set, makes the server require client
// certificates signed by it (mutual TLS).
type TLSFiles struct {
	Cert, Key, CA string
}

// Enabled reports whether any file is set.
func (t TLSFiles) Enabled() bool { return t.Cert != "" || t.Key != "" || t.CA != "" }

func (t TLSFiles) validate() error {
	if t.Enabled() && (t.Cert == "" || t.Key == "") {
		return fmt.Errorf("natsembed: TLS needs both a certificate and a key (got cert %q, key %q)", t.Cert, t.Key)
	}
	return nil
}

// applySecurity adds the accounts, users and permissions of c.AuthConf
// and the TLS listener to opts.
func (c *Config) applySecurity(opts *server.Options) error {
	if c.AuthConf != "" {
		// ProcessConfigString only sets what the text names: users,
		// their permissions, accounts.
		if err := opts.ProcessConfigString(c.AuthConf); err != nil {
			return fmt.Errorf("natsembed: Config.AuthConf: %w", err)
		}
		if len(opts.Nkeys)+len(opts.Users) == 0 {
			return fmt.Errorf("natsembed: Config.AuthConf defines no users")
		}
	}
	if !c.TLS.Enabled() {
		return nil
	}
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: c.TLS.Cert,
		KeyFile:  c.TLS.Key,
		CaFile:   c.TLS.CA,
		Verify:   c.TLS.CA != "",
	})
	if err != nil {
		return fmt.Errorf("natsembed: TLS: %w", err)
	}
	opts.TLSConfig = tc
	opts.TLS = true
	opts.TLSVerify = c.TLS.CA != ""
	opts.TLSTimeout = 2
	return nil
}
