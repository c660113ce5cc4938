package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections/summaries"
)

// TestRun_projections: serve keeps the read model; threads reads it;
// status shows the lag; rebuild refuses under the live projector, and with
// --force rebuilds the same summaries, which serve's projector then takes
// back; any NATS client reads a summary from the bucket.
func TestRun_projections(t *testing.T) {
	url, _ := serveInProcess(t)
	ctx := t.Context()
	natsArgs := []string{"--nats", url}
	for i, th := range []string{"t1", "t2", "t1"} {
		code, _, errOut := runCLI(t, ctx, append([]string{"post", th, fmt.Sprintf("hello %d", i), "--wait"}, natsArgs...)...)
		if code != exitOK {
			t.Fatalf("post: exit %d: %s", code, errOut)
		}
	}
	threads := func() []threadSummary {
		t.Helper()
		code, out, errOut := runCLI(t, ctx, append([]string{"threads", "--json"}, natsArgs...)...)
		var sums []threadSummary
		if err := json.Unmarshal([]byte(out), &sums); code != exitOK || err != nil {
			t.Fatalf("threads --json: exit %d, %v\n%s%s", code, err, out, errOut)
		}
		return sums
	}
	before := threads()
	if len(before) != 2 || before[0].Thread != "t1" || before[0].Runs != 2 || before[1].Runs != 1 || before[0].Status != statusIdle {
		t.Fatalf("threads: %+v", before)
	}
	status := func() summaries.Lag {
		t.Helper()
		var l summaries.Lag
		code, out, errOut := runCLI(t, ctx, append([]string{"projections", "status", "--json"}, natsArgs...)...)
		if err := json.Unmarshal([]byte(out), &l); code != exitOK || err != nil {
			t.Fatalf("projections status: exit %d, %v\n%s%s", code, err, out, errOut)
		}
		return l
	}
	caughtUp := func() summaries.Lag {
		t.Helper()
		var l summaries.Lag
		testkit.CheckFor(t, 15*time.Second, func() error {
			if l = status(); l.Behind != 0 || !l.OwnerLive || l.Checkpoint == 0 {
				return fmt.Errorf("not caught up: %+v", l)
			}
			return nil
		})
		return l
	}
	l := caughtUp()
	if !strings.HasSuffix(l.Owner, "/summaries") || l.Durable != summaries.DefaultDurable {
		t.Errorf("status: %+v", l)
	}
	code, out, _ := runCLI(t, ctx, append([]string{"projections", "status"}, natsArgs...)...)
	if code != exitOK || !strings.Contains(out, "lag:") || !strings.Contains(out, "0 events") {
		t.Errorf("projections status: exit %d\n%s", code, out)
	}

	code, _, errOut := runCLI(t, ctx, append([]string{"projections", "rebuild"}, natsArgs...)...)
	if code != exitFail || !strings.Contains(errOut, "--force") {
		t.Errorf("rebuild under serve's projector: exit %d: %s", code, errOut)
	}
	code, out, errOut = runCLI(t, ctx, append([]string{"projections", "rebuild", "--force"}, natsArgs...)...)
	if code != exitOK || !strings.Contains(out, "rebuilt thread_summaries") || !strings.Contains(errOut, "rebuild: ") {
		t.Fatalf("rebuild --force: exit %d\n%s%s", code, out, errOut)
	}
	if l2 := caughtUp(); l2.Epoch != l.Epoch+1 || l2.Owner != l.Owner {
		t.Errorf("after rebuild: %+v, before %+v", l2, l)
	}
	if after := threads(); !reflect.DeepEqual(after, before) {
		t.Errorf("threads after rebuild:\n%+v\nbefore:\n%+v", after, before)
	}

	// What any NATS client sees: nats kv get thread_summaries t1.
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, summaries.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	var s summaries.Summary
	if err := json.Unmarshal(e.Value(), &s); err != nil || s.Thread != "t1" || s.Runs != 2 || s.Status != summaries.StatusIdle {
		t.Errorf("kv get t1: %v\n%s", err, e.Value())
	}
}

// Without a read model, threads folds the stream; status says there is none.
func TestRun_threadsWithoutReadModel(t *testing.T) {
	url, _ := serveInProcess(t, "--projector=false")
	ctx := t.Context()
	if code, _, errOut := runCLI(t, ctx, "post", "solo", "hi", "--wait", "--nats", url); code != exitOK {
		t.Fatalf("post: %s", errOut)
	}
	code, out, _ := runCLI(t, ctx, "threads", "--json", "--nats", url)
	var sums []threadSummary
	if err := json.Unmarshal([]byte(out), &sums); code != exitOK || err != nil || len(sums) != 1 || sums[0].Runs != 1 {
		t.Fatalf("threads --json: exit %d, %v\n%s", code, err, out)
	}
	code, _, errOut := runCLI(t, ctx, "projections", "status", "--nats", url)
	if code != exitFail || !strings.Contains(errOut, "no read model") {
		t.Errorf("status without a read model: exit %d: %s", code, errOut)
	}
}
