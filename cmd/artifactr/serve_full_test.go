package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/internal/testkit"
)

func jsAt(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// fillStore fills the server's JetStream storage with another stream's
// messages until a publish is refused for want of storage. Deleting that
// stream (freeStore) frees the space, as deleting the file that filled a
// disk does.
func fillStore(t *testing.T, url string) {
	t.Helper()
	js := jsAt(t, url)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "FILLER", Subjects: []string{"filler.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	blob := make([]byte, 32<<10)
	for i := 0; ; i++ {
		_, err := js.Publish(t.Context(), "filler.x", blob)
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == 10023 {
			break
		}
		if err != nil || i > 10_000 {
			t.Fatalf("filling the store: %d messages: %v", i, err)
		}
	}
}

func freeStore(t *testing.T, url string) {
	t.Helper()
	if err := jsAt(t, url).DeleteStream(t.Context(), "FILLER"); err != nil {
		t.Fatal(err)
	}
}

// Issue 23, item 6: a full store is a clear, recoverable state. A post is
// refused as "not written: ... out of storage" (a definite refusal, not an
// unknown outcome); a graceful stop, with a run active whose end cannot be
// written, exits 0 and says what it could not write; serve starts again on
// the full store, reads work and writes are refused; once space is freed it
// writes again by itself: it abandons the run left and runs the next post.
func TestRun_serveFullStore(t *testing.T) {
	data := t.TempDir()
	args := []string{"--max-store", fmt.Sprint(4 << 20), "--claim-ttl", "1s", "--shutdown-grace", "300ms"}
	s := startServe(t, data, append(args, "--echo-delay", "1h")...)
	post := func(text string, extra ...string) (int, string, string) {
		return runCLI(t, t.Context(), append([]string{"post", "t1", text, "--nats", s.url, "--timeout", "20s"}, extra...)...)
	}
	if code, out, errOut := post("hello"); code != exitOK {
		t.Fatalf("post before the store filled: exit %d\n%s%s", code, out, errOut)
	}
	testkit.CheckFor(t, 20*time.Second, func() error {
		if _, out, _ := runCLI(t, t.Context(), "threads", "--nats", s.url); !strings.Contains(out, "run-") {
			return fmt.Errorf("no active run yet:\n%s", out)
		}
		return nil
	})
	fillStore(t, s.url)
	code, _, errOut := post("refused")
	if code != exitFail || !strings.Contains(errOut, "not written: the server at") || !strings.Contains(errOut, "out of storage") {
		t.Fatalf("post to a full store: exit %d, stderr:\n%s", code, errOut)
	}
	s.stop() // exits 0 (checked by stop) though the release cannot be written
	if out := s.out.String(); !strings.Contains(out, "not written: the server is out of storage") {
		t.Errorf("the stop did not say what it could not write:\n%s", out)
	}

	s = startServe(t, data, args...) // on the full store
	defer s.stop()
	if code, out, errOut := runCLI(t, t.Context(), "show", "t1", "--nats", s.url); code != exitOK || !strings.Contains(out, "hello") {
		t.Fatalf("show on a full store: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := post("refused again"); code != exitFail || !strings.Contains(errOut, "out of storage") {
		t.Fatalf("post after the restart on a full store: exit %d, stderr:\n%s", code, errOut)
	}
	freeStore(t, s.url)
	testkit.CheckFor(t, 30*time.Second, func() error {
		code, out, errOut := post("after", "--wait", "--id", "after-1")
		if code != exitOK || !strings.Contains(out, "echo: after") {
			return fmt.Errorf("post after freeing space: exit %d\n%s%s", code, out, errOut)
		}
		return nil
	})
}
