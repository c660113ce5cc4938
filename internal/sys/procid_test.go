package sys

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

func TestProcessID_hostPidRandom(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	re := regexp.MustCompile("^" + regexp.QuoteMeta(host) + "-" + strconv.Itoa(os.Getpid()) + "-[0-9a-f]{8}$")
	a, b := ProcessID(), ProcessID()
	if !re.MatchString(a) {
		t.Fatalf("ProcessID() = %q, want host-pid-8hex (%s)", a, re)
	}
	if a == b {
		t.Fatalf("two calls gave the same id %q", a)
	}
}
