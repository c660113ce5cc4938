package events

import (
	"errors"
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
