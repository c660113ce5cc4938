package openai

import (
	"net/http"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{{0, 500 * time.Millisecond}, {1, time.Second}, {3, 4 * time.Second}, {7, time.Minute}, {40, time.Minute}, {1 << 20, time.Minute}} {
		if got := backoff(tc.attempt, time.Minute); got != tc.want {
			t.Errorf("backoff(%d) = %s, want %s", tc.attempt, got, tc.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"none", http.Header{}, -1},
		{"seconds", http.Header{"Retry-After": {"7"}}, 7 * time.Second},
		{"fraction", http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond},
		{"zero", http.Header{"Retry-After": {"0"}}, 0},
		{"date", http.Header{"Retry-After": {"Mon, 30 Nov 2026 12:00:09 GMT"}}, 9 * time.Second},
		{"past date", http.Header{"Retry-After": {"Mon, 30 Nov 2026 11:00:00 GMT"}}, 0},
		{"negative", http.Header{"Retry-After": {"-3"}}, -1},
		{"huge", http.Header{"Retry-After": {"1e300"}}, -1},
		{"garbage", http.Header{"Retry-After": {"soon"}}, -1},
		{"ms first", http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"2"}}, 1500 * time.Millisecond},
		{"bad ms", http.Header{"Retry-After-Ms": {"x"}, "Retry-After": {"2"}}, 2 * time.Second},
	} {
		if got := retryAfter(tc.h, now); got != tc.want {
			t.Errorf("%s: retryAfter(%v) = %s, want %s", tc.name, tc.h, got, tc.want)
		}
	}
}
