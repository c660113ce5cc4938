package exec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// reaper is this process's record of the programs it started, so that it
// can tell them from the orphans that a subreaper inherits.
var reaper struct {
	mu      sync.Mutex // held across a program's start, so a new child is always known
	on      bool       // StartReaper is in effect
	leaders map[int]bool
}

// sweepEvery is how often a started reaper kills and reaps orphans while
// it runs, so that a program that leaves processes behind fills no table.
var sweepEvery = time.Second

// StartReaper makes this process a child subreaper (PR_SET_CHILD_SUBREAPER):
// a process that an exec agent's program leaves behind and whose parent
// exits, one started with setsid or a double fork included, becomes a
// child of this process instead of init's. Every such orphan is killed and
// reaped when a run ends, every second while the reaper is on, and by
// stop. Only a process whose children are all exec agents' programs may
// call it (serve does): any other child this process did not start through
// an [Agent] is taken for an orphan.
//
// stop kills the trees of the programs still running and every orphan,
// then turns the subreaper off.
func StartReaper() (stop func(), err error) {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if reaper.on {
		return nil, errors.New("exec: the reaper is already started")
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("exec: become a child subreaper: %w", err)
	}
	reaper.on = true
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(sweepEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				sweepOrphans()
			case <-quit:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			<-done
			reaper.mu.Lock()
			leaders := make([]int, 0, len(reaper.leaders))
			for pid := range reaper.leaders {
				leaders = append(leaders, pid)
			}
			reaper.mu.Unlock()
			for _, pid := range leaders {
				killTree(pid) // their runs' own stop reaps them
			}
			sweepOrphans()
			reaper.mu.Lock()
			reaper.on = false
			_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
			reaper.mu.Unlock()
		})
	}, nil
}

// startTracked starts cmd with the reaper's lock held and records it as a
// program of this package until its Wait returns (forget).
func startTracked(start func() error, pid func() int) error {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if err := start(); err != nil {
		return err
	}
	if reaper.leaders == nil {
		reaper.leaders = make(map[int]bool)
	}
	reaper.leaders[pid()] = true
	return nil
}

// forget drops a program that was reaped.
func forget(pid int) {
	reaper.mu.Lock()
	delete(reaper.leaders, pid)
	reaper.mu.Unlock()
}

// sweepOrphans kills and reaps every child of this process that is not a
// running program of this package, until none is left: the children of a
// killed orphan become orphans in turn. It does nothing unless the reaper
// is on.
func sweepOrphans() {
	for range 100 { // a fork bomb cannot keep it here for ever
		reaper.mu.Lock()
		if !reaper.on {
			reaper.mu.Unlock()
			return
		}
		var orphans []int
		self := os.Getpid()
		for _, p := range procTable() {
			if p.ppid == self && !reaper.leaders[p.pid] {
				orphans = append(orphans, p.pid)
			}
		}
		for _, pid := range orphans {
			killTree(pid)
		}
		reaper.mu.Unlock()
		if len(orphans) == 0 {
			return
		}
		for _, pid := range orphans {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, 0, nil)
		}
	}
}

// proc is one process of the table.
type proc struct{ pid, ppid int }

// procTable lists the processes this one can see in /proc.
func procTable() []proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]proc, 0, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		// "pid (comm) state ppid ...": comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(string(f[1]))
		if err != nil {
			continue
		}
		out = append(out, proc{pid: pid, ppid: ppid})
	}
	return out
}

// descendants returns the processes below pid, found by their parents.
func descendants(pid int) []int {
	kids := make(map[int][]int)
	for _, p := range procTable() {
		kids[p.ppid] = append(kids[p.ppid], p.pid)
	}
	var out []int
	todo := []int{pid}
	for len(todo) > 0 {
		n := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for _, c := range kids[n] {
			out = append(out, c)
			todo = append(todo, c)
		}
	}
	return out
}

// killTree kills pid and every process below it, deepest last found first
// stopped: each is sent SIGSTOP, so none forks while the tree is walked,
// then SIGKILL.
func killTree(pid int) {
	all := append([]int{pid}, descendants(pid)...)
	for _, p := range all {
		_ = syscall.Kill(p, syscall.SIGSTOP)
	}
	// Children forked before their parent stopped.
	for _, p := range descendants(pid) {
		_ = syscall.Kill(p, syscall.SIGSTOP)
		all = append(all, p)
	}
	for _, p := range all {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}
