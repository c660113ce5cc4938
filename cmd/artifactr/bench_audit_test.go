package main

import (
	"strings"
	"testing"
)

// A small `bench audit` keeps the benchmark working: its generated log
// audits clean, and it prints both rates and their ratio. The 1M-event run
// is a command, not a test: artifactr bench audit --events 1000000.
func TestRun_benchAuditSmall(t *testing.T) {
	code, out, errOut := runCLI(t, t.Context(), "bench", "audit", "--events", "20000", "--threads", "200", "--rounds", "1")
	if code != exitOK {
		t.Fatalf("bench audit: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"raw:", "audit:", "ratio:", "20000 events, 200 threads, 0 violations, 0 anomalies"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	t.Log(out)
}
