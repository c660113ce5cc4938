package runner

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactr/artifactr/internal/testkit"
)

// testPool returns a pool counted in wg, whose quit closes and whose
// goroutines are waited for when t ends.
func testPool(t *testing.T) *pool {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(quit); wg.Wait() })
	return newPool(quit, &wg)
}

// idleWorkers reports how many workers wait for a task.
func (p *pool) idleWorkers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// waitClosed fails t unless ch is closed within 10 s.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal(what)
	}
}

// waitGroupDone returns a channel closed once wg's count is zero.
func waitGroupDone(wg *sync.WaitGroup) <-chan struct{} {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// Tasks given one after another run on one worker, which then waits idle.
func TestPool_reusesIdleWorker(t *testing.T) {
	p := testPool(t)
	var workers sync.Map
	for i := range 50 {
		done := make(chan struct{})
		p.Go(func() {
			workers.Store(goid(), true)
			close(done)
		})
		<-done
		testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("task %d's worker idle again", i), func() (bool, string) {
			return p.idleWorkers() == 1, fmt.Sprintf("%d idle", p.idleWorkers())
		})
	}
	n := 0
	workers.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Fatalf("50 tasks in a row ran on %d goroutines, want 1", n)
	}
}

// Every task given concurrently runs once, and quit ends every worker and
// the janitor.
func TestPool_concurrentTasksAndQuit(t *testing.T) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	p := newPool(quit, &wg)
	const givers, each = 8, 500
	var ran [givers * each]atomic.Int32
	var given sync.WaitGroup
	for g := range givers {
		given.Add(1)
		go func() {
			defer given.Done()
			for i := range each {
				p.Go(func() { ran[g*each+i].Add(1) })
			}
		}()
	}
	given.Wait()
	testkit.WaitFor(t, 10*time.Second, "every task run", func() (bool, string) {
		n := 0
		for i := range ran {
			if ran[i].Load() > 0 {
				n++
			}
		}
		return n == len(ran), fmt.Sprintf("%d of %d run", n, len(ran))
	})
	for i := range ran {
		if c := ran[i].Load(); c != 1 {
			t.Fatalf("task %d ran %d times", i, c)
		}
	}
	close(quit)
	waitClosed(t, waitGroupDone(&wg), "workers or janitor still running after quit")
	// A task given after quit still runs, on a worker that then ends.
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	wg.Wait()
}

// A pool that never ran a task has nothing to end: newPool starts no
// goroutine (goleak, in TestMain, would see one).
func TestPool_unusedStartsNothing(t *testing.T) {
	var wg sync.WaitGroup
	_ = newPool(make(chan struct{}), &wg)
	waitClosed(t, waitGroupDone(&wg), "an unused pool, its quit never closed, still counts a goroutine")
}

// Workers idle longer than workerIdle end by themselves.
func TestPool_idleWorkersEnd(t *testing.T) {
	p := testPool(t)
	var started, release sync.WaitGroup
	release.Add(1)
	for range 4 {
		started.Add(1)
		p.Go(func() { started.Done(); release.Wait() })
	}
	started.Wait()
	release.Done()
	testkit.WaitFor(t, 10*time.Second, "4 idle workers", func() (bool, string) {
		return p.idleWorkers() == 4, fmt.Sprintf("%d idle", p.idleWorkers())
	})
	testkit.WaitFor(t, 10*time.Second, "the idle workers to end", func() (bool, string) {
		return p.idleWorkers() == 0, fmt.Sprintf("%d idle", p.idleWorkers())
	})
}

// goid identifies the calling goroutine by its stack's header line.
func goid() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	var id string
	fmt.Sscanf(string(b), "goroutine %s", &id)
	return id
}
