package sys

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
)

// ProcessID names this process for ids that must differ between processes
// and stay readable in logs (a runner's id, a projector's owner). It returns
// host-pid-random, with 8 random hex digits: two processes on one host, or
// one pid reused after a restart, still get different ids.
func ProcessID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}
