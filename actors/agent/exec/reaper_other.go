//go:build !linux

package exec

import "errors"

// StartReaper is Linux only: elsewhere a program's descendants that leave
// its process group are not tracked.
func StartReaper() (stop func(), err error) {
	return nil, errors.New("exec: the reaper needs Linux")
}

func startTracked(start func() error, _ func() int) error { return start() }
func forget(int)                                          {}
func sweepOrphans()                                       {}
func killTree(int)                                        {}
