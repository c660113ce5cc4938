package natsstore

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// Issue 23, item 8: another application's stream on overlapping subjects
// makes New fail naming that stream, not with a bare 10065.
func TestNew_overlappingStreamNamed(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	_, js := connect(t, srv)
	if _, err := js.CreateStream(ctxT(t), jetstream.StreamConfig{Name: "OTHER_APP", Subjects: []string{"threads.x.>"}}); err != nil {
		t.Fatal(err)
	}
	s, err := New(context.Background(), Config{URL: srv.ClientURL()})
	if err == nil {
		s.Close()
		t.Fatal("New created a stream over another's subjects")
	}
	if !strings.Contains(err.Error(), "stream OTHER_APP already holds overlapping subjects") || !strings.Contains(err.Error(), "10065") {
		t.Errorf("error does not name the overlapping stream: %v", err)
	}
}
