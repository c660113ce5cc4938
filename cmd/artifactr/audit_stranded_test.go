package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// TestRun_auditStranded: a thread whose post its holder released without
// taking (issue 21) is a warning in `audit`, text and JSON, not a
// violation: the exit code stays 0. Within --stranded-after it is no
// warning; a negative one is a usage error.
func TestRun_auditStranded(t *testing.T) {
	url, store := specServer(t)
	ctx := t.Context()
	c, _, err := events.AcquireClaim(ctx, store, "s1", "r1/a", time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ack, err := store.Post(ctx, "s1", &eventspb.MessagePosted{MessageId: "m1", Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if err := events.ReleaseClaim(ctx, store, c, "idle", time.Now()); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI(t, ctx, "audit", "--nats", url)
	if code != exitOK || strings.Contains(out, "stranded") {
		t.Fatalf("audit within the default bound: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, ctx, "audit", "--stranded-after", "1ns", "--nats", url)
	if code != exitOK || !strings.HasPrefix(out, "audit OK") || !strings.Contains(out, "warnings: 1 threads stranded") || !strings.Contains(out, "thread s1: 1 pending from seq "+itoa(ack.Seq)) {
		t.Fatalf("audit --stranded-after 1ns: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, ctx, "audit", "--stranded-after", "1ns", "--json", "--thread", "s1", "--nats", url)
	var rep struct {
		OK            bool `json:"ok"`
		StrandedCount int  `json:"stranded_count"`
		Stranded      []struct {
			Thread    string `json:"thread"`
			OldestSeq uint64 `json:"oldest_seq"`
		} `json:"stranded"`
	}
	if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil || !rep.OK || rep.StrandedCount != 1 ||
		len(rep.Stranded) != 1 || rep.Stranded[0].Thread != "s1" || rep.Stranded[0].OldestSeq != ack.Seq {
		t.Fatalf("audit --json: exit %d, err %v\n%s", code, err, out)
	}
	if code, _, errOut = runCLI(t, ctx, "audit", "--stranded-after", "-1s", "--nats", url); code != exitUsage || !strings.Contains(errOut, "--stranded-after") {
		t.Fatalf("a negative --stranded-after: exit %d, stderr %q", code, errOut)
	}
}
