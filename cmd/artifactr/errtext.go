package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/artifactr/artifactr/events/natsstore"
)

// rootCause is the innermost error of err's chain: the one that says what
// went wrong, without the packages' prefixes around it, each of which may
// repeat the URL. Of an error wrapping several (fmt.Errorf("%w: %w",
// sentinel, cause)), the last is the cause.
func rootCause(err error) error {
	for {
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next := u.Unwrap()
			if next == nil {
				return err
			}
			err = next
		case interface{ Unwrap() []error }:
			errs := u.Unwrap()
			if len(errs) == 0 {
				return err
			}
			err = errs[len(errs)-1]
		default:
			return err
		}
	}
}

// causeText is rootCause's message, without a package prefix that only
// names where it came from ("natsstore: ").
func causeText(err error) string {
	msg := rootCause(err).Error()
	for _, p := range []string{"natsstore: ", "client: ", "events: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// packagePrefixes are the prefixes artifactr's packages give their errors
// ("client: post to t1: events: append conflict: ..."). Said to a person,
// the chain reads better without them: it is all artifactr.
var packagePrefixes = []string{"client: ", "events: ", "natsstore: ", "natsembed: ", "doubletext: "}

// withoutPackages is msg without the package prefixes of its parts.
func withoutPackages(msg string) string {
	for _, p := range packagePrefixes {
		msg = strings.TrimPrefix(msg, p)
		msg = strings.ReplaceAll(msg, ": "+p, ": ")
	}
	return msg
}

// natsSchemes are the URL schemes nats.go connects with.
var natsSchemes = map[string]bool{"nats": true, "tls": true, "ws": true, "wss": true}

// validateNATSURLs checks --nats: comma-separated URLs, each with a host,
// as nats.go reads them (a URL without a scheme is nats://).
func validateNATSURLs(list string) error {
	n := 0
	for _, raw := range strings.Split(list, ",") {
		s := strings.TrimSpace(raw)
		if s == "" {
			continue
		}
		n++
		full := s
		if !strings.Contains(s, "://") {
			full = "nats://" + s
		}
		u, err := url.Parse(full)
		if err != nil {
			return usagef("--nats %q: not a URL: %v", s, errors.Unwrap(err))
		}
		switch {
		case !natsSchemes[u.Scheme]:
			return usagef("--nats %q: scheme %q: want nats://, tls://, ws:// or wss://", s, u.Scheme)
		case u.Hostname() == "":
			return usagef("--nats %q: no host: want a URL such as nats://127.0.0.1:4222", s)
		case u.Path != "" && u.Path != "/" && u.Scheme != "ws" && u.Scheme != "wss":
			return usagef("--nats %q: a NATS URL has no path", s)
		}
	}
	if n == 0 {
		return usagef("--nats: empty URL")
	}
	return nil
}

// errCodeSubjectOverlap is JetStream's "subjects overlap with an existing
// stream".
const errCodeSubjectOverlap = 10065

// overlapError explains a stream the server refused to create because
// another stream holds its subjects: there is no artifactr stream of that
// name, and most likely --stream is mistyped.
func overlapError(url, stream string, err error) error {
	if code, ok := natsstore.ErrorCode(err); !ok || code != errCodeSubjectOverlap {
		return nil
	}
	return fmt.Errorf("no artifactr stream %s at %s, and it cannot be created: another stream holds its subjects (is --stream right? the default is ARTIFACTR)", stream, url)
}
