package events

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/artifactr/artifactr/events/eventspb"
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

// MaxPartitions is the largest partition count a layout may have.
const MaxPartitions = 1024

// Partition returns thread's partition among p: the FNV-1a 32-bit hash of
// the thread id's bytes, modulo p. It is what nats-server's subject mapping
// function {{partition(p,1)}} computes over the thread token
// (server/subject_transform.go, getHashPartition), so a server-side mapping
// and a client that computes it agree. p <= 1 is one partition: 0.
//
// In any language: h = 2166136261; for each byte b of the id:
// h = (h XOR b) * 16777619 mod 2^32; the partition is h mod p.
func Partition(thread string, p int) int {
	if p <= 1 {
		return 0
	}
	h := uint32(2166136261)
	for i := 0; i < len(thread); i++ {
		h ^= uint32(thread[i])
		h *= 16777619
	}
	return int(h % uint32(p))
}

// Subjects names the subjects of a deployment's streams: a prefix, and a
// partition count.
//
// With one partition (Partitions 0 or 1, today's layout) there is one stream
// and a thread's subjects are <prefix>.T.<kind>. With P > 1 there is one
// stream per partition, and a thread's subjects are <prefix>.<p>.T.<kind>,
// p = [Partition](T, P): partition p's stream holds <prefix>.<p>.>. A
// thread lives in exactly one stream, so its sequences keep their meaning;
// sequences of threads in different partitions are not comparable.
type Subjects struct {
	Prefix string
	// Partitions is the partition count; 0 means 1.
	Partitions int
	// RunFence is the RUNFENCE layout (spec README, "Claims on the run
	// subject"): claim markers and releases are stored on the thread's run
	// subject, so every holder write is one compare-and-set on it. It is a
	// property of the stream, chosen when the stream is made: old and new
	// protocols must never share a stream.
	RunFence bool
}

// KindOf returns the kind of subject a store writes an event of type t
// to: t.Kind(), except that under RunFence the claim markers and releases
// go to the run subject.
func (s Subjects) KindOf(t Type) Kind {
	k := t.Kind()
	if s.RunFence && k == KindClaim {
		return KindRun
	}
	return k
}

// CheckAppend is [CheckAppend] under this layout: under RunFence, an
// unguarded [Fenced] is refused with [ErrInvalidEvent], because the
// run-subject fence is a compare-and-set on the run subject and needs its
// last sequence ([FencedGuarded]).
func (s Subjects) CheckAppend(ev *eventspb.Event, chk Check, opts []AppendOption) (AppendOptions, error) {
	o, err := CheckAppend(ev, chk, opts)
	if err == nil && s.RunFence && chk.Mode == CheckFence && !chk.Guarded {
		err = fmt.Errorf("%w: %s: the run-subject fence needs the run subject's last sequence: use FencedGuarded", ErrInvalidEvent, TypeOf(ev))
	}
	return o, err
}

// PartitionCount returns the number of partitions, at least 1.
func (s Subjects) PartitionCount() int { return max(s.Partitions, 1) }

// Partitioned reports whether there is more than one partition.
func (s Subjects) Partitioned() bool { return s.Partitions > 1 }

// PartitionOf returns thread t's partition.
func (s Subjects) PartitionOf(t string) int { return Partition(t, s.Partitions) }

// base returns the subject prefix of t's partition, without a trailing dot:
// threads, or threads.<p>.
func (s Subjects) base(t string) string {
	if !s.Partitioned() {
		return s.prefix()
	}
	return s.prefix() + "." + strconv.Itoa(s.PartitionOf(t))
}

// Thread returns the subject of kind k for thread t, such as threads.T.run,
// or threads.<p>.T.run when partitioned.
func (s Subjects) Thread(t string, k Kind) string {
	return s.base(t) + "." + t + "." + string(k)
}

// ThreadAll returns the wildcard subject of all of t's events: threads.T.>
// (threads.<p>.T.> when partitioned).
func (s Subjects) ThreadAll(t string) string { return s.base(t) + "." + t + ".>" }

// IsGuard reports whether subject is a thread's guard subject,
// <prefix>.T.guard, or <prefix>.<p>.T.guard when partitioned (see
// [KindGuard]): a message there is no event, and readers skip it.
func (s Subjects) IsGuard(subject string) bool {
	rest, ok := strings.CutSuffix(subject, "."+string(KindGuard))
	if !ok {
		return false
	}
	rest, ok = strings.CutPrefix(rest, s.prefix()+".")
	if ok && s.Partitioned() {
		var tok string
		tok, rest, ok = strings.Cut(rest, ".")
		if ok && ValidateThreadID(rest) == nil {
			ok = tok == strconv.Itoa(s.PartitionOf(rest))
		}
	}
	return ok && ValidateThreadID(rest) == nil
}

// All returns the wildcard subject of every thread's events in every
// partition: threads.>. With more than one partition no stream holds all
// of it, so a store can tail or consume it only partition by partition
// ([Subjects.PartitionAll]).
func (s Subjects) All() string { return s.prefix() + ".>" }

// AllOf returns the wildcard subject of one kind across threads and
// partitions: threads.*.posted, or threads.*.*.posted when partitioned.
func (s Subjects) AllOf(k Kind) string {
	if s.Partitioned() {
		return s.prefix() + ".*.*." + string(k)
	}
	return s.prefix() + ".*." + string(k)
}

// PartitionAll returns the wildcard subject of partition p's events, which
// its stream holds: threads.<p>.>, or All with one partition.
func (s Subjects) PartitionAll(p int) string {
	if !s.Partitioned() {
		return s.All()
	}
	return s.prefix() + "." + strconv.Itoa(p) + ".>"
}

// PartitionAllOf returns the wildcard subject of one kind in partition p:
// threads.<p>.*.posted, or AllOf with one partition.
func (s Subjects) PartitionAllOf(p int, k Kind) string {
	if !s.Partitioned() {
		return s.AllOf(k)
	}
	return s.prefix() + "." + strconv.Itoa(p) + ".*." + string(k)
}

// FilterPartition returns the one partition whose stream holds every
// subject filter matches, and false when it spans several (or none).
// With one partition it is always 0.
func (s Subjects) FilterPartition(filter string) (int, bool) {
	if !s.Partitioned() {
		return 0, true
	}
	rest, found := strings.CutPrefix(filter, s.prefix()+".")
	if !found {
		return 0, false
	}
	tok, _, _ := strings.Cut(rest, ".")
	p, err := strconv.Atoi(tok)
	if err != nil || p < 0 || p >= s.Partitions || strconv.Itoa(p) != tok {
		return 0, false
	}
	return p, true
}

// Parse splits a subject into thread and kind. ok is false for a subject that
// is not prefix.T.kind (prefix.<p>.T.kind when partitioned, with p the
// thread's partition) with a valid thread id and a known kind.
func (s Subjects) Parse(subject string) (thread string, kind Kind, ok bool) {
	rest, found := strings.CutPrefix(subject, s.prefix()+".")
	if !found {
		return "", "", false
	}
	var part string
	if s.Partitioned() {
		if part, rest, found = strings.Cut(rest, "."); !found {
			return "", "", false
		}
	}
	thread, k, found := strings.Cut(rest, ".")
	if !found || ValidateThreadID(thread) != nil {
		return "", "", false
	}
	if s.Partitioned() && part != strconv.Itoa(s.PartitionOf(thread)) {
		// A subject in the wrong partition was not written by a store of
		// this layout: report it, never route it.
		return thread, "", false
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
