package bench

import (
	"context"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/natsstore"
)

// followStream calls fn with every event of the stream from sequence from (0:
// only new ones) in a goroutine, until the returned stop is called.
func followStream(ctx context.Context, store *natsstore.Store, from uint64, fn func(events.Envelope)) (stop func(), err error) {
	subj := store.Subjects()
	tails := make([]events.Tail, subj.PartitionCount())
	for p := range tails {
		if tails[p], err = store.Tail(ctx, subj.PartitionAll(p), from); err != nil {
			for _, t := range tails[:p] {
				t.Stop()
			}
			return nil, err
		}
	}
	fctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, tail := range tails {
		wg.Go(func() {
			defer tail.Stop()
			for {
				env, err := tail.Next(fctx)
				if err != nil {
					return
				}
				fn(env) // from one goroutine per partition: fn locks
			}
		})
	}
	return func() { cancel(); wg.Wait() }, nil
}

// parallel runs fn(0..n-1) concurrently and returns the first error; the
// first error cancels the others' ctx.
func parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, n)
	for i := range n {
		go func() {
			err := fn(ctx, i)
			if err != nil {
				cancel()
			}
			errs <- err
		}()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// pct returns the p-th percentile of ds (nearest rank).
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.5) - 1
	i = min(max(i, 0), len(s)-1)
	return s[i].Round(10 * time.Microsecond)
}

// median is the middle of v (the mean of the two middle values when
// there are as many on each side), or 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ms is d in milliseconds, for the figures of the results.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuProfile starts a CPU profile written to path; stop ends it and
// closes the file.
func cpuProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
