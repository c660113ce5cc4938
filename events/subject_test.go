package events

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestValidateThreadID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want string // in the error; "" for a valid id
	}{
		{"t1", ""},
		{"A-b_9", ""},
		{strings.Repeat("x", 128), ""},
		{"", "empty"},
		{strings.Repeat("x", 129), "129 characters"},
		{"a.b", `'.' at byte 1`},
		{"café", `non-ASCII character 'é' (U+00E9) at byte 3`},
		{"日本", `'日' (U+65E5) at byte 0`},
		{"a\xffb", "not valid UTF-8 at byte 1"},
	} {
		err := ValidateThreadID(tc.id)
		if tc.want == "" {
			if err != nil {
				t.Errorf("ValidateThreadID(%q) = %v", tc.id, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidThreadID) {
			t.Errorf("ValidateThreadID(%q) = %v, want ErrInvalidThreadID", tc.id, err)
			continue
		}
		for _, want := range []string{tc.want, ThreadIDPattern} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("ValidateThreadID(%q) = %q, want it to say %q", tc.id, err, want)
			}
		}
	}
}

func TestValidateMessageID(t *testing.T) {
	for _, id := range []string{"m1", "0123", strings.Repeat("i", MaxMessageIDLen)} {
		if err := ValidateMessageID(id); err != nil {
			t.Errorf("ValidateMessageID(%q) = %v", id, err)
		}
	}
	for _, id := range []string{"", "a:b", "a b", "ü", strings.Repeat("i", MaxMessageIDLen+1)} {
		err := ValidateMessageID(id)
		if !errors.Is(err, ErrInvalidEvent) || !strings.Contains(err.Error(), "invalid message id") {
			t.Errorf("ValidateMessageID(%q) = %v, want ErrInvalidEvent", id, err)
		}
	}
}

// The partition function is FNV-1a 32-bit mod P. The hashes were computed
// apart from this code, in Python:
//
//	h = 2166136261
//	for b in s.encode(): h = ((h ^ b) * 16777619) & 0xffffffff
//
// and natsstore's TestPartition_serverMapping checks the same function
// against nats-server's own {{partition(P,1)}} mapping.
func TestPartition(t *testing.T) {
	for _, tc := range []struct {
		thread      string
		hash        uint32
		p4, p6, p64 int
	}{
		{"t1", 0x0844ecd6, 2, 4, 22},
		{"t2", 0x0744eb43, 3, 5, 3},
		{"a", 0xe40c292c, 0, 4, 44},
		{"thread-42", 0x1d0bf7d6, 2, 0, 22},
		{"x", 0xfd0c5087, 3, 3, 7},
		{"demo", 0xaefd3536, 2, 0, 54},
		{"A-b_9", 0x641e7c97, 3, 3, 23},
	} {
		if got := Partition(tc.thread, 1<<32-1); uint32(got) != tc.hash%(1<<32-1) {
			t.Errorf("Partition(%q, 2^32-1) = %d, want the hash %#x mod 2^32-1", tc.thread, got, tc.hash)
		}
		for _, c := range []struct{ p, want int }{{4, tc.p4}, {6, tc.p6}, {64, tc.p64}, {1, 0}, {0, 0}} {
			if got := Partition(tc.thread, c.p); got != c.want {
				t.Errorf("Partition(%q, %d) = %d, want %d", tc.thread, c.p, got, c.want)
			}
		}
	}
}

func TestSubjects_partitioned(t *testing.T) {
	one, four := Subjects{}, Subjects{Prefix: "threads", Partitions: 4}
	// P=1 is the layout before partitions, unchanged.
	if got := one.Thread("t1", KindClaim); got != "threads.t1.claim" {
		t.Errorf("P=1 claim subject %q", got)
	}
	if got := one.ThreadAll("t1"); got != "threads.t1.>" {
		t.Errorf("P=1 thread filter %q", got)
	}
	if got, got2 := one.PartitionAll(0), one.PartitionAllOf(0, KindPosted); got != "threads.>" || got2 != "threads.*.posted" {
		t.Errorf("P=1 partition filters %q %q", got, got2)
	}
	// t1 hashes to 2 of 4, t2 to 3 (TestPartition).
	if got := four.Thread("t1", KindClaim); got != "threads.2.t1.claim" {
		t.Errorf("P=4 claim subject %q", got)
	}
	if got := four.ThreadAll("t2"); got != "threads.3.t2.>" {
		t.Errorf("P=4 thread filter %q", got)
	}
	if got := four.AllOf(KindPosted); got != "threads.*.*.posted" {
		t.Errorf("P=4 posted filter %q", got)
	}
	if got := four.PartitionAllOf(1, KindPosted); got != "threads.1.*.posted" {
		t.Errorf("P=4 partition posted filter %q", got)
	}
	for _, th := range []string{"t1", "t2", "a", "7", "thread-42"} {
		for _, k := range Kinds() {
			subj := four.Thread(th, k)
			if gt, gk, ok := four.Parse(subj); !ok || gt != th || gk != k {
				t.Errorf("Parse(%q) = %q %q %v", subj, gt, gk, ok)
			}
			if p, ok := four.FilterPartition(subj); !ok || p != Partition(th, 4) {
				t.Errorf("FilterPartition(%q) = %d %v, want %d", subj, p, ok, Partition(th, 4))
			}
			// The P=1 subject is not a P=4 one.
			if _, _, ok := four.Parse(one.Thread(th, k)); ok {
				t.Errorf("P=4 Parse took the P=1 subject %q", one.Thread(th, k))
			}
		}
	}
	// A subject in another partition than its thread's is not parsed.
	if _, _, ok := four.Parse("threads.0.t1.claim"); ok {
		t.Error("Parse took t1 in partition 0; its partition is 2")
	}
	for _, f := range []string{"threads.>", "threads.*.*.posted", "threads.4.>", "threads.01.>", "other.1.>", "threads.-1.>"} {
		if p, ok := four.FilterPartition(f); ok {
			t.Errorf("FilterPartition(%q) = %d, want none: it spans partitions or names none", f, p)
		}
	}
	if p, ok := four.FilterPartition("threads.3.>"); !ok || p != 3 {
		t.Errorf("FilterPartition(threads.3.>) = %d %v", p, ok)
	}
}

// A guard subject is recognised in both layouts, and only where the
// thread's partition puts it.
func TestSubjects_IsGuard(t *testing.T) {
	one, four := Subjects{}, Subjects{Partitions: 4}
	p := Partition("t1", 4)
	other := (p + 1) % 4
	for _, tc := range []struct {
		s       Subjects
		subject string
		want    bool
	}{
		{one, one.Thread("t1", KindGuard), true},
		{one, "threads.t1.run", false},
		{one, "threads.bad id.guard", false},
		{four, four.Thread("t1", KindGuard), true},
		{four, fmt.Sprintf("threads.%d.t1.guard", other), false},
		{four, "threads.t1.guard", false},
		{four, four.Thread("t1", KindRun), false},
	} {
		if got := tc.s.IsGuard(tc.subject); got != tc.want {
			t.Errorf("P%d IsGuard(%q) = %v, want %v", tc.s.PartitionCount(), tc.subject, got, tc.want)
		}
	}
}
