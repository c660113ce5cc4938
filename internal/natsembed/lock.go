package natsembed

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrDataDirLocked is returned by [Start] when another server, in this
// process or another, holds the data directory. Two servers on one
// directory both ack writes at the same sequences and lose each other's
// on restart, so the second one must not start.
var ErrDataDirLocked = errors.New("natsembed: data directory in use")

// ErrListenInUse is returned by [Start] when the client (or cluster) address
// is taken by another listener. It is checked before the server opens its
// store.
var ErrListenInUse = errors.New("natsembed: listen address in use")

// LockFile is the file in the data directory that Start holds an
// exclusive flock on while the server runs. It records the holder's pid.
// The kernel releases the lock when the process dies, kill -9 included, so
// a stale file never blocks a restart.
const LockFile = ".artifactr.lock"

// dirLock is a held lock on a data directory.
type dirLock struct {
	f *os.File
}

// lockDataDir creates dir if needed and takes the exclusive lock on its
// LockFile without waiting.
func lockDataDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("natsembed: data directory: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("natsembed: lock data directory: %w", err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("natsembed: lock %s: %w", path, err)
	}
	if !held {
		holder := readHolder(f)
		f.Close()
		return nil, fmt.Errorf("%w: %s is locked by another server (%s); stop it first, or pass another data directory",
			ErrDataDirLocked, dir, holder)
	}
	// The pid is informational: the lock, not the file's content, decides.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

func readHolder(f *os.File) string {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid := strings.TrimSpace(string(b[:n]))
	if _, err := strconv.Atoi(pid); err != nil {
		return "pid unknown"
	}
	if pid == strconv.Itoa(os.Getpid()) {
		return "pid " + pid + ", this process"
	}
	return "pid " + pid
}

// release drops the lock. The file stays: removing it would let two
// servers lock two different files of the same name.
func (l *dirLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = unlock(l.f)
	l.f.Close()
	l.f = nil
}

// checkListen fails with ErrListenInUse when host:port cannot be bound now.
// Port -1 and 0 pick a free port and are always fine. Another process could
// take the port in between; the server then fails to start, but the data
// directory is locked, so no second server ever shares it.
func checkListen(what, host string, port int) error {
	if port <= 0 {
		return nil
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w: %s address %s is taken (by another artifactr serve or nats-server?); stop it, or listen elsewhere",
			ErrListenInUse, what, addr)
	}
	if err != nil {
		return fmt.Errorf("natsembed: cannot listen on %s address %s: %w", what, addr, err)
	}
	return l.Close()
}

// Preflight checks, creating and writing nothing, what Start would check
// before it opens the store: that no server holds dataDir, and that the
// client address listen is free. A caller that writes into dataDir before
// Start (serve --auth keeps its seeds there) calls it first, so that a
// refused start leaves nothing behind. It fails with [ErrDataDirLocked],
// [ErrListenInUse] or an error about listen's form.
func Preflight(dataDir, listen string) error {
	f, err := os.Open(filepath.Join(dataDir, LockFile))
	switch {
	case err == nil:
		held, lerr := tryLock(f)
		if lerr == nil && !held {
			holder := readHolder(f)
			f.Close()
			return fmt.Errorf("%w: %s is locked by another server (%s); stop it first, or pass another data directory",
				ErrDataDirLocked, dataDir, holder)
		}
		if held {
			_ = unlock(f)
		}
		f.Close()
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("natsembed: data directory: %w", err)
	}
	host, port, err := splitHostPort(listen)
	if err != nil {
		return fmt.Errorf("natsembed: listen address: %w", err)
	}
	return checkListen("client", host, port)
}
