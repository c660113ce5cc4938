package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/httpapi"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/summaries"
)

// threadsInPartitions returns n thread ids, each in a partition of its own
// of p (n <= p), named prefix0, prefix1, ...
func threadsInPartitions(prefix string, n, p int) []string {
	seen := map[int]bool{}
	var out []string
	for i := 0; len(out) < n; i++ {
		th := fmt.Sprintf("%s%d", prefix, i)
		if q := events.Partition(th, p); !seen[q] {
			seen[q] = true
			out = append(out, th)
		}
	}
	return out
}

// serve --partitions 4 --http, end to end: posts through the CLI and the
// HTTP API to threads in all four partitions; threads lists them all;
// show, watch and a fork across partitions work; every partition's
// projector catches up and the read model equals the log; audit and audit
// --spec over all partitions (and one) are clean.
func TestRun_partitionsServeHTTP(t *testing.T) {
	const parts = 4
	s := startServe(t, t.TempDir(), "--partitions", "4", "--http", "127.0.0.1:0", "--claim-ttl", "2s")
	defer s.stop()
	m := httpRE.FindStringSubmatch(s.out.String())
	if m == nil {
		t.Fatalf("no HTTP line:\n%s", s.out.String())
	}
	api := m[1]
	ctx := t.Context()
	conn := []string{"--nats", s.url, "--partitions", "4"}
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, ctx, append(args, conn...)...)
	}
	ths := threadsInPartitions("pt", parts, parts)
	for _, th := range ths[:2] {
		if code, out, errOut := cli("post", th, "hello "+th, "--wait"); code != exitOK || !strings.Contains(out, "echo: hello "+th) {
			t.Fatalf("post %s: exit %d\n%s%s", th, code, out, errOut)
		}
	}
	for _, th := range ths[2:] {
		body := `{"assistant_id":"echo","if_not_exists":"create","input":{"messages":[{"role":"user","content":"hi ` + th + `"}]}}`
		req, _ := http.NewRequestWithContext(ctx, "POST", api+"/threads/"+th+"/runs/wait", strings.NewReader(body))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(b), "echo: hi "+th) {
			t.Fatalf("HTTP run on %s: %d %s", th, res.StatusCode, b)
		}
	}
	// The HTTP API's search reads the summaries of every partition.
	res, err := http.Post(api+"/threads/search", "application/json", strings.NewReader(`{"limit":100}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, th := range ths {
		if !strings.Contains(string(b), `"thread_id":"`+th+`"`) {
			t.Fatalf("threads/search lacks %s: %d %s", th, res.StatusCode, b)
		}
	}

	// A fork by reference from one partition into another.
	code, out, _ := cli("show", ths[0], "--json")
	var src threadView
	if err := json.Unmarshal([]byte(out), &src); code != exitOK || err != nil || len(src.Runs) != 1 {
		t.Fatalf("show %s --json: exit %d, %v\n%s", ths[0], code, err, out)
	}
	fork := "pfork"
	for events.Partition(fork, parts) == events.Partition(ths[0], parts) {
		fork += "x"
	}
	at := fmt.Sprint(src.Runs[0].EndSeq)
	if code, out, errOut := cli("fork", ths[0], "--at", at, fork); code != exitOK {
		t.Fatalf("fork %s into %s: exit %d\n%s%s", ths[0], fork, code, out, errOut)
	}
	if code, out, errOut := cli("post", fork, "again", "--wait"); code != exitOK || !strings.Contains(out, "echo: again") {
		t.Fatalf("post %s: exit %d\n%s%s", fork, code, out, errOut)
	}
	if code, out, _ := cli("show", fork); code != exitOK || !strings.Contains(out, "from "+ths[0]+" at "+at) || !strings.Contains(out, `"hello `+ths[0]+`"  -> history`) {
		t.Fatalf("show %s: exit %d\n%s", fork, code, out)
	}
	if code, out, errOut := cli("show", ths[0], "--at", at); code != exitOK || !strings.Contains(out, "hello "+ths[0]) {
		t.Fatalf("show %s --at %s: exit %d\n%s%s", ths[0], at, code, out, errOut)
	}
	all := append(append([]string{}, ths...), fork)

	// threads lists every partition's threads.
	code, out, errOut := cli("threads", "--json")
	var rows []threadSummary
	if err := json.Unmarshal([]byte(out), &rows); code != exitOK || err != nil {
		t.Fatalf("threads --json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	var listed []string
	for _, r := range rows {
		listed = append(listed, r.Thread)
		if r.Status != statusIdle || r.Runs < 1 {
			t.Errorf("threads: %+v", r)
		}
	}
	if want := slices.Sorted(slices.Values(all)); !reflect.DeepEqual(listed, want) {
		t.Fatalf("threads lists %v, want %v", listed, want)
	}

	// watch every thread from the start: each partition's events come.
	var wout, werr testkit.SyncBuffer
	wctx, stopWatch := context.WithCancel(ctx)
	wdone := make(chan int, 1)
	go func() {
		wdone <- run(wctx, append([]string{"watch", "--from", "all", "--json"}, conn...), &wout, &werr)
	}()
	testkit.CheckFor(t, 15*time.Second, func() error {
		for _, th := range all {
			if !strings.Contains(wout.String(), `"thread":"`+th+`"`) {
				return fmt.Errorf("watch has no event of %s yet:\n%s%s", th, wout.String(), werr.String())
			}
		}
		return nil
	})
	stopWatch()
	if code := <-wdone; code != exitOK {
		t.Fatalf("watch: exit %d: %s", code, werr.String())
	}

	// Every partition's projector catches up; the read model is the fold.
	testkit.CheckFor(t, 20*time.Second, func() error {
		code, out, errOut := cli("projections", "status", "--json")
		var lags []summaries.Lag
		if err := json.Unmarshal([]byte(out), &lags); code != exitOK || err != nil || len(lags) != parts || !strings.Contains(out, `"partition": 0,`) {
			return fmt.Errorf("projections status: exit %d, %v\n%s%s", code, err, out, errOut)
		}
		for p, l := range lags {
			if l.Partition != p || l.Behind != 0 || !l.OwnerLive || l.Checkpoint == 0 {
				return fmt.Errorf("partition %d not caught up: %+v", p, l)
			}
		}
		return nil
	})
	store, err := natsstore.New(ctx, natsstore.Config{URL: s.url, Partitions: parts, NoCreate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	snap, err := summaries.Read(ctx, store, summaries.DefaultBucket)
	if err != nil || len(snap.Summaries) != len(all) {
		t.Fatalf("summaries.Read: %d summaries, %v", len(snap.Summaries), err)
	}
	for _, sum := range snap.Summaries {
		envs, err := store.Load(ctx, sum.Thread, 1)
		if err == nil {
			err = projections.ResolveFirst(ctx, store, envs)
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := summaries.FromThread(projections.Fold(sum.Thread, envs)); !reflect.DeepEqual(sum, want) {
			t.Errorf("summary of %s:\n got %+v\nwant %+v", sum.Thread, sum, want)
		}
	}
	if snap.Folded != 0 {
		t.Errorf("caught up, yet Read folded %d events itself", snap.Folded)
	}

	// A rebuild of every partition, one after another, gives the same.
	code, out, errOut = cli("projections", "rebuild", "--force")
	if code != exitOK || strings.Count(out, "rebuilt thread_summaries partition ") != parts {
		t.Fatalf("projections rebuild --force: exit %d\n%s%s", code, out, errOut)
	}
	again, err := summaries.Read(ctx, store, summaries.DefaultBucket)
	if err != nil || !reflect.DeepEqual(again.Summaries, snap.Summaries) {
		t.Fatalf("after the rebuild: %v\n got %+v\nwant %+v", err, again.Summaries, snap.Summaries)
	}

	// The console's thread list and audit read every partition.
	get := func(method, path, body string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, api+path, strings.NewReader(body))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
		}
		return string(b)
	}
	testkit.CheckFor(t, 10*time.Second, func() error {
		if b := get("GET", "/artifactr/threads", ""); !strings.Contains(b, fmt.Sprintf(`"total":%d`, len(all))) {
			return fmt.Errorf("console threads: %s", b)
		}
		return nil
	})
	if b := get("POST", "/artifactr/audit", `{"spec":true}`); !strings.Contains(b, `"ok":true`) || !strings.Contains(b, fmt.Sprintf(`"threads":%d`, len(all))) {
		t.Fatalf("console audit: %s", b)
	}

	// The audit, with the spec, over every partition; then one partition.
	code, out, errOut = cli("audit", "--spec", "--json")
	var rep struct {
		Audit struct {
			Events  int `json:"events"`
			Threads int `json:"threads"`
		} `json:"audit"`
		Spec struct {
			Threads int `json:"threads"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil || rep.Audit.Threads != len(all) || rep.Spec.Threads != len(all) {
		t.Fatalf("audit --spec: exit %d, %v: %+v\n%s%s", code, err, rep, out, errOut)
	}
	var total uint64
	for p := range parts {
		n, err := store.LastPartitionSeq(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if uint64(rep.Audit.Events) != total {
		t.Errorf("audit saw %d events, the partitions hold %d", rep.Audit.Events, total)
	}
	p := events.Partition(ths[1], parts)
	code, out, errOut = cli("audit", "--partition", fmt.Sprint(p), "--json")
	if err := json.Unmarshal([]byte(out), &rep.Audit); code != exitOK || err != nil || rep.Audit.Threads != 1 {
		t.Fatalf("audit --partition %d: exit %d, %v: %+v\n%s%s", p, code, err, rep.Audit, out, errOut)
	}
	if code, _, errOut := cli("audit", "--from", "2"); code != exitUsage || !strings.Contains(errOut, "--partition") {
		t.Errorf("audit --from without --partition: exit %d: %s", code, errOut)
	}
}

// serve --auth --partitions 4 --http: the roles grant the partitioned
// subjects and every partition's stream. The client posts to threads in
// all four partitions (through the CLI and the HTTP API) and lists them;
// the auditor reads the projectors' status and audits with the spec; serve
// itself, the runner, is refused nothing (startServeArgs checks).
func TestRun_partitionsAuth(t *testing.T) {
	const parts = 4
	data := t.TempDir()
	url, out, stop := startServeArgs(t, "--auth", "--data", data, "--listen", "127.0.0.1:0", "--partitions", "4",
		"--http", "127.0.0.1:0", "--claim-ttl", "2s")
	defer stop()
	auth := filepath.Join(data, "auth")
	as := func(role string) []string {
		return []string{"--nats", url, "--partitions", "4", "--nkey", filepath.Join(auth, role+".nk")}
	}
	ctx := t.Context()
	ths := threadsInPartitions("pa", parts, parts)
	for _, th := range ths[:3] {
		code, stdout, errOut := runCLI(t, ctx, append([]string{"post", th, "hello", "--wait"}, as("client")...)...)
		if code != exitOK || !strings.Contains(stdout, "echo: hello") {
			t.Fatalf("post %s as client: exit %d\n%s%s", th, code, stdout, errOut)
		}
	}
	m := httpRE.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no HTTP line:\n%s", out.String())
	}
	tok, err := os.ReadFile(filepath.Join(auth, httpapi.ClientTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"assistant_id":"echo","if_not_exists":"create","input":{"messages":[{"role":"user","content":"hi"}]}}`
	req, _ := http.NewRequestWithContext(ctx, "POST", m[1]+"/threads/"+ths[3]+"/runs/wait", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(b), "echo: hi") {
		t.Fatalf("HTTP run on %s: %d %s", ths[3], res.StatusCode, b)
	}
	code, stdout, errOut := runCLI(t, ctx, append([]string{"threads", "--json"}, as("client")...)...)
	var rows []threadSummary
	if err := json.Unmarshal([]byte(stdout), &rows); code != exitOK || err != nil || len(rows) != parts {
		t.Fatalf("threads as client: exit %d, %v: %d rows\n%s%s", code, err, len(rows), stdout, errOut)
	}
	testkit.CheckFor(t, 20*time.Second, func() error {
		code, stdout, errOut := runCLI(t, ctx, append([]string{"projections", "status", "--json"}, as("auditor")...)...)
		var lags []summaries.Lag
		if err := json.Unmarshal([]byte(stdout), &lags); code != exitOK || err != nil || len(lags) != parts {
			return fmt.Errorf("projections status as auditor: exit %d, %v\n%s%s", code, err, stdout, errOut)
		}
		for _, l := range lags {
			if l.Behind != 0 || !l.OwnerLive || !l.DurableExists {
				return fmt.Errorf("partition %d: %+v", l.Partition, l)
			}
		}
		return nil
	})
	if code, stdout, errOut := runCLI(t, ctx, append([]string{"audit", "--spec"}, as("auditor")...)...); code != exitOK {
		t.Fatalf("audit --spec as auditor: exit %d\n%s%s", code, stdout, errOut)
	}
	code, _, errOut = runCLI(t, ctx, append([]string{"post", ths[0], "no"}, as("auditor")...)...)
	if code != exitFail || !strings.Contains(errOut, "permission denied") {
		t.Errorf("post as auditor: exit %d\n%s", code, errOut)
	}
}
