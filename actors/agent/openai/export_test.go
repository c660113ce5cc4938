package openai

import (
	"context"
	"time"
)

// SetClock replaces the clock that reads Retry-After dates and the wait
// between retries, so tests see the waits asked for without waiting.
func SetClock(a *Agent, now func() time.Time, sleep func(ctx context.Context, d time.Duration) bool) {
	a.now, a.sleep = now, sleep
}
