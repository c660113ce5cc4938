package runner

import (
	"sync"
	"time"
)

// workerIdle is how long a pool's worker stays idle, waiting for another
// task, before it exits (up to twice that: the pool looks once per
// workerIdle).
const workerIdle = time.Second

// pool runs tasks on goroutines it keeps for a while after each task.
// Reusing goroutines keeps their grown stacks: a fresh goroutine per append
// or per actor mailbox run grew its stack by copying each time, several
// percent of the runner's CPU at 100,000 threads.
//
// Idle workers wait on a channel of their own, on a stack: a task goes to
// the worker idle the shortest time, and a worker waits with a plain
// receive. Waiting in a select on a channel all workers shared, with a
// timer each, cost a few percent of the CPU at 100,000 threads in channel
// locks and timer resets. A janitor, once per workerIdle, ends the workers
// idle longer than that, from the bottom of the stack.
type pool struct {
	quit <-chan struct{} // once closed, workers end when their task does
	wg   *sync.WaitGroup // counts the workers and the janitor, if not nil

	// janitorOnce starts the janitor with the first task, so a pool that
	// never ran one (a runner whose Start failed) leaves no goroutine.
	janitorOnce sync.Once

	mu     sync.Mutex // protects the fields below
	idle   []*worker  // the longest idle first
	closed bool       // quit was seen: idle workers are not kept
}

// worker is an idle goroutine's hand-off.
type worker struct {
	tasks chan func() // one slot: a task, or closed to end the worker
	since time.Time   // idle since; set under pool.mu
}

// newPool returns a pool whose workers end once quit is closed.
func newPool(quit <-chan struct{}, wg *sync.WaitGroup) *pool {
	return &pool{quit: quit, wg: wg}
}

// Go runs fn on an idle worker, or on a new one when none is idle.
func (p *pool) Go(fn func()) {
	p.janitorOnce.Do(func() {
		if p.wg != nil {
			p.wg.Add(1)
		}
		go p.janitor()
	})
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.tasks <- fn // never blocks: the slot is free while idle
		return
	}
	p.mu.Unlock()
	if p.wg != nil {
		p.wg.Add(1)
	}
	go p.work(&worker{tasks: make(chan func(), 1)}, fn)
}

func (p *pool) work(w *worker, fn func()) {
	if p.wg != nil {
		defer p.wg.Done()
	}
	for fn != nil {
		fn()
		if !p.park(w) {
			return
		}
		fn = <-w.tasks // nil once closed
	}
}

// park puts w on the idle stack, unless the pool is closed.
func (p *pool) park(w *worker) bool {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	w.since = now
	p.idle = append(p.idle, w)
	return true
}

// janitor ends the workers idle longer than workerIdle, and every idle
// worker once quit is closed.
func (p *pool) janitor() {
	if p.wg != nil {
		defer p.wg.Done()
	}
	t := time.NewTicker(workerIdle)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			p.mu.Lock()
			p.closed = true
			ended := p.idle
			p.idle = nil
			p.mu.Unlock()
			endWorkers(ended)
			return
		case now := <-t.C:
			p.mu.Lock()
			n := 0
			for n < len(p.idle) && now.Sub(p.idle[n].since) >= workerIdle {
				n++
			}
			ended := make([]*worker, n)
			copy(ended, p.idle[:n])
			rest := copy(p.idle, p.idle[n:])
			clear(p.idle[rest:])
			p.idle = p.idle[:rest]
			p.mu.Unlock()
			endWorkers(ended)
		}
	}
}

func endWorkers(ws []*worker) {
	for _, w := range ws {
		close(w.tasks)
	}
}

// Schedule implements protoactor's actor.Dispatcher, so mailboxes run on
// the pool too.
func (p *pool) Schedule(fn func()) { p.Go(fn) }

// Throughput implements actor.Dispatcher: messages a mailbox takes per run,
// protoactor's default.
func (p *pool) Throughput() int { return 300 }
