package events

import (
	"fmt"
	"strings"
)

// MaxThreadIDLen is the longest thread id accepted.
const MaxThreadIDLen = 128

// DefaultPrefix is the default first subject token of the stream.
const DefaultPrefix = "threads"

// Kind names one of a thread's three subjects.
type Kind string

// The subjects of a thread, threads.T.<kind>.
const (
	KindPosted Kind = "posted"
	KindClaim  Kind = "claim"
	KindRun    Kind = "run"
)

// ValidateThreadID returns an error wrapping [ErrInvalidThreadID] unless id is
// 1 to 128 characters from [A-Za-z0-9_-].
func ValidateThreadID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty (want [A-Za-z0-9_-]{1,%d})", ErrInvalidThreadID, MaxThreadIDLen)
	}
	if len(id) > MaxThreadIDLen {
		return fmt.Errorf("%w: %d characters, more than %d", ErrInvalidThreadID, len(id), MaxThreadIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: %q has %q at offset %d (want [A-Za-z0-9_-]{1,%d})", ErrInvalidThreadID, id, c, i, MaxThreadIDLen)
		}
	}
	return nil
}

// Subjects names the subjects of a stream with a given prefix.
type Subjects struct {
	Prefix string
}

// Thread returns the subject of kind k for thread t, such as threads.T.run.
func (s Subjects) Thread(t string, k Kind) string {
	return s.prefix() + "." + t + "." + string(k)
}

// ThreadAll returns the wildcard subject of all of t's events: threads.T.>.
func (s Subjects) ThreadAll(t string) string { return s.prefix() + "." + t + ".>" }

// All returns the wildcard subject of every thread's events: threads.>.
func (s Subjects) All() string { return s.prefix() + ".>" }

// AllOf returns the wildcard subject of one kind across threads: threads.*.posted.
func (s Subjects) AllOf(k Kind) string { return s.prefix() + ".*." + string(k) }

// Parse splits a subject into thread and kind. ok is false for a subject that
// is not prefix.T.kind with a valid thread id and a known kind.
func (s Subjects) Parse(subject string) (thread string, kind Kind, ok bool) {
	rest, found := strings.CutPrefix(subject, s.prefix()+".")
	if !found {
		return "", "", false
	}
	thread, k, found := strings.Cut(rest, ".")
	if !found || ValidateThreadID(thread) != nil {
		return "", "", false
	}
	switch Kind(k) {
	case KindPosted, KindClaim, KindRun:
		return thread, Kind(k), true
	}
	return thread, "", false
}

func (s Subjects) prefix() string {
	if s.Prefix == "" {
		return DefaultPrefix
	}
	return s.Prefix
}
