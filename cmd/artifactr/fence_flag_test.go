package main

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// --fence names the layout of a stream a command makes: run by default,
// claim on request; a stream already made keeps its own, whatever a later
// command's --fence says; a name that is neither is a usage error.
func TestRun_fenceFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the stream's artifactr.fence metadata
	}{
		{nil, "run"},
		{[]string{"--fence", "claim"}, ""},
	} {
		srv := natsembedtest.RunForTest(t)
		url := srv.ClientURL()
		args := append([]string{"post", "t1", "hi", "--nats", url}, tc.args...)
		if code, _, errOut := runCLI(t, t.Context(), args...); code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		other := "claim"
		if tc.want == "" {
			other = "run"
		}
		if code, _, errOut := runCLI(t, t.Context(), "post", "t1", "again", "--nats", url, "--fence", other); code != exitOK {
			t.Fatalf("post --fence %s on the stream %v made: exit %d: %s", other, tc.args, code, errOut)
		}
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		st, err := js.Stream(t.Context(), natsstore.DefaultStream)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.CachedInfo().Config.Metadata[natsstore.MetaFence]; got != tc.want {
			t.Errorf("post %v, then post --fence %s: the stream records fence %q, want %q", tc.args, other, got, tc.want)
		}
		nc.Close()
	}
	srv := natsembedtest.RunForTest(t)
	code, _, errOut := runCLI(t, t.Context(), "post", "t1", "hi", "--nats", srv.ClientURL(), "--fence", "bogus")
	if code != exitUsage || !strings.Contains(errOut, `--fence "bogus": want run or claim`) {
		t.Fatalf("--fence bogus: exit %d, stderr:\n%s", code, errOut)
	}
}
