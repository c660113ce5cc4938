package events

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
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

// KindGuard names a thread's guard subject, threads.T.guard. It holds no
// events: a guarded consuming append (see [FencedGuarded]) stores there the
// message that checks the run subject, in one atomic batch with the event.
// Stores never hand a guard message to readers, and it is not in [Kinds].
const KindGuard Kind = "guard"

// Kinds lists a thread's three subject kinds: [KindPosted], [KindClaim],
// [KindRun]. It returns an array, a fresh copy, so no caller can change the
// list for others.
func Kinds() [3]Kind { return [3]Kind{KindPosted, KindClaim, KindRun} }

// ThreadIDPattern is the form of a valid thread id, for messages.
const ThreadIDPattern = "[A-Za-z0-9_-]{1,128}"

// MaxMessageIDLen is the longest message id accepted.
const MaxMessageIDLen = 128

// ValidateThreadID returns an error wrapping [ErrInvalidThreadID] unless id is
// 1 to 128 characters from [A-Za-z0-9_-]. The error names the offending
// character (as a Unicode character, not a byte) and the allowed pattern.
func ValidateThreadID(id string) error {
	if why := checkToken(id, MaxThreadIDLen); why != "" {
		return fmt.Errorf("%w: %s (want %s)", ErrInvalidThreadID, why, ThreadIDPattern)
	}
	return nil
}

// ValidateMessageID returns an error wrapping [ErrInvalidEvent] unless id is
// 1 to 128 characters from [A-Za-z0-9_-], as thread ids are: the id goes
// into the Nats-Msg-Id header and shows in logs, so it is kept plain.
func ValidateMessageID(id string) error {
	if why := checkToken(id, MaxMessageIDLen); why != "" {
		return fmt.Errorf("%w: invalid message id: %s (want [A-Za-z0-9_-]{1,%d})", ErrInvalidEvent, why, MaxMessageIDLen)
	}
	return nil
}

// checkToken says what is wrong with id as a token of at most max
// characters from [A-Za-z0-9_-], or "" when nothing is.
func checkToken(id string, max int) string {
	if id == "" {
		return "empty"
	}
	for i, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
		if ok {
			continue
		}
		switch {
		case r == utf8.RuneError && !utf8.ValidString(id):
			return fmt.Sprintf("%q is not valid UTF-8 at byte %d", id, i)
		case r > unicode.MaxASCII:
			return fmt.Sprintf("%q has the non-ASCII character %q (%U) at byte %d; only ASCII letters, digits, _ and - are allowed", id, r, r, i)
		}
		return fmt.Sprintf("%q has %q at byte %d", id, r, i)
	}
	if len(id) > max {
		return fmt.Sprintf("%d characters, more than %d", len(id), max)
	}
	return ""
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

// IsGuard reports whether subject is a thread's guard subject,
// <prefix>.T.guard (see [KindGuard]): a message there is no event, and
// readers skip it.
func (s Subjects) IsGuard(subject string) bool {
	rest, ok := strings.CutSuffix(subject, "."+string(KindGuard))
	if !ok {
		return false
	}
	rest, ok = strings.CutPrefix(rest, s.prefix()+".")
	return ok && ValidateThreadID(rest) == nil
}

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
