package main

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// init --partitions 4 makes four streams; every command must then name
// the count, and one that does not fails saying which.
func TestRun_partitions(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	url := srv.ClientURL()
	code, out, errOut := runCLI(t, t.Context(), "init", "--partitions", "4", "--nats", url, "--json")
	if code != exitOK {
		t.Fatalf("init --partitions 4: exit %d: %s", code, errOut)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for p := range 4 {
		if _, err := js.Stream(t.Context(), natsstore.PartitionStream(natsstore.DefaultStream, p, 4)); err != nil {
			t.Fatalf("init --partitions 4 made no stream for partition %d: %v (%s)", p, err, out)
		}
	}
	code, _, errOut = runCLI(t, t.Context(), "post", "t1", "hi", "--nats", url)
	if code == exitOK || !strings.Contains(errOut, "--partitions 4") {
		t.Fatalf("post without --partitions on a deployment of 4: exit %d: %s", code, errOut)
	}
	if code, _, errOut = runCLI(t, t.Context(), "post", "t1", "hi", "--nats", url, "--partitions", "4"); code != exitOK {
		t.Fatalf("post --partitions 4: exit %d: %s", code, errOut)
	}
	st, err := js.Stream(t.Context(), natsstore.PartitionStream(natsstore.DefaultStream, events.Partition("t1", 4), 4))
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := st.Info(t.Context()); info.State.Msgs != 1 {
		t.Fatalf("t1's partition stream holds %d messages, want its post", info.State.Msgs)
	}
	if code, _, errOut = runCLI(t, t.Context(), "post", "t1", "hi", "--nats", url, "--partitions", "0"); code != exitUsage {
		t.Fatalf("--partitions 0: exit %d: %s", code, errOut)
	}
}
