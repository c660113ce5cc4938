package natsstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// ErrPermissionDenied is wrapped by the error of a write the server refused
// because the connection's user may not publish to its subject: nothing
// was written. Roles and their permissions are in examples/nats/roles.conf.
var ErrPermissionDenied = errors.New("natsstore: permission denied")

// connectOptions are the options of a connection the store dials: its own,
// then cfg.ConnectOptions (credentials, TLS), which may override them.
func (s *Store) connectOptions() []nats.Option {
	opts := []nats.Option{
		nats.Name("artifactr"),
		nats.Timeout(s.cfg.Timeout),
		nats.MaxReconnects(-1),
		// The server refuses a publish it does not permit with an
		// asynchronous -ERR and no reply; say so in the log, since the
		// caller only sees its request time out.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				s.cfg.Logger.Warn("natsstore: the NATS server refused a request: the user lacks the permission", "err", err)
				return
			}
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			s.cfg.Logger.Warn("natsstore: NATS connection error", "err", err, "subject", subject)
		}),
	}
	return append(opts, s.cfg.ConnectOptions...)
}

// publishDenied returns an error wrapping [ErrPermissionDenied] when the
// server refused this connection a publish to subject. The server answers
// such a publish with a -ERR that nats.go keeps as the connection's last
// error; a publish that got no ack can be told from a lost ack by it.
// Permissions hold for the whole connection, so no attempt landed.
func (s *Store) publishDenied(subject string) error {
	err := s.nc.LastError()
	if err == nil || !errors.Is(err, nats.ErrPermissionViolation) {
		return nil
	}
	if !strings.Contains(err.Error(), `Publish to "`+subject+`"`) {
		return nil
	}
	return fmt.Errorf("%w: may not publish to %s (is this the right role's --nkey or --creds?): %w", ErrPermissionDenied, subject, err)
}

// denied adds [ErrPermissionDenied] to err, the failure of a JetStream API
// request to subject, when the server refused the connection that
// request: such a request gets no reply, so err alone reads as an
// unreachable server.
func (s *Store) denied(err error, subject string) error {
	if err == nil || errors.Is(err, ErrPermissionDenied) {
		return err
	}
	last := s.nc.LastError()
	if last == nil || !errors.Is(last, nats.ErrPermissionViolation) || !strings.Contains(last.Error(), `Publish to "`+subject+`"`) {
		return err
	}
	return fmt.Errorf("%w: may not publish to %s (creating or changing the stream and buckets is the admin role's: artifactr init --nkey admin.nk): %w", ErrPermissionDenied, subject, err)
}

// createSubject is the JetStream API subject that creates stream.
func (s *Store) createSubject(stream string) string { return s.api.subject("STREAM.CREATE." + stream) }
