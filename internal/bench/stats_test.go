package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPct_nearestRank(t *testing.T) {
	ds := []time.Duration{5 * time.Millisecond, 1 * time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 3 * time.Millisecond}, {0.99, 5 * time.Millisecond}, {0, time.Millisecond}} {
		if got := pct(ds, tc.p); got != tc.want {
			t.Errorf("pct(%v) = %s, want %s", tc.p, got, tc.want)
		}
	}
	if got := pct(nil, 0.5); got != 0 {
		t.Errorf("pct of none = %s, want 0", got)
	}
	if ds[0] != 5*time.Millisecond {
		t.Error("pct sorted its input")
	}
}

func TestMedian_oddEvenNone(t *testing.T) {
	for _, tc := range []struct {
		v    []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {nil, 0}} {
		if got := median(tc.v); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

// The first error is returned and cancels the others, which would
// otherwise wait forever.
func TestParallel_firstErrorCancels(t *testing.T) {
	boom := errors.New("boom")
	err := parallel(t.Context(), 3, func(ctx context.Context, i int) error {
		if i == 1 {
			return boom
		}
		<-ctx.Done()
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
}
