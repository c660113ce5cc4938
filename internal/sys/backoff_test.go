package sys

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestBackoff_Wait_doublesToCap: each wait sleeps twice the one before,
// until the cap. The bubble's clock is fake, so the delays are exact and
// the test does not wait for them.
func TestBackoff_Wait_doublesToCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBackoff(50*time.Millisecond, 400*time.Millisecond)
		want := []time.Duration{50, 100, 200, 400, 400, 400}
		for i, w := range want {
			start := time.Now()
			if !b.Wait(context.Background()) {
				t.Fatalf("wait %d: reported an ended context", i)
			}
			if got := time.Since(start); got != w*time.Millisecond {
				t.Errorf("wait %d slept %s, want %s", i, got, w*time.Millisecond)
			}
		}
	})
}

func TestBackoff_Wait_contextEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := NewBackoff(time.Hour, time.Hour)
	if b.Wait(ctx) {
		t.Fatal("a wait whose context ended reported true")
	}
}
