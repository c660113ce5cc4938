package natsstore

import (
	"errors"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// A post's W3C trace context is stored as its traceparent and tracestate
// headers, which any NATS client can read, and comes back in the envelope
// from Load and from a tail.
func TestStore_Post_traceContext(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	const tp, ts = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "vendor=x"
	ack, err := s.Post(ctxT(t), "tc", &eventspb.MessagePosted{MessageId: "m1", Text: "hi"}, events.WithTraceContext(tp, ts))
	if err != nil {
		t.Fatal(err)
	}
	post(t, s, "tc", "m2") // none
	_, js := connect(t, srv)
	stream, err := js.Stream(ctxT(t), s.cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := stream.GetMsg(ctxT(t), ack.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Header.Get("traceparent") != tp || raw.Header.Get("tracestate") != ts {
		t.Errorf("stored headers traceparent %q tracestate %q", raw.Header.Get("traceparent"), raw.Header.Get("tracestate"))
	}
	envs, err := s.Load(ctxT(t), "tc", 1)
	if err != nil || len(envs) != 2 {
		t.Fatalf("load: %d events, %v", len(envs), err)
	}
	if envs[0].TraceParent != tp || envs[1].TraceParent != "" {
		t.Errorf("loaded traceparents %q and %q, want %q and none", envs[0].TraceParent, envs[1].TraceParent, tp)
	}
	tail, err := s.Tail(ctxT(t), s.subj.ThreadAll("tc"), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Stop()
	env, err := tail.Next(ctxT(t))
	if err != nil || env.TraceParent != tp {
		t.Errorf("tailed traceparent %q (err %v), want %q", env.TraceParent, err, tp)
	}
	if _, err := s.Post(ctxT(t), "tc", &eventspb.MessagePosted{Text: "x"}, events.WithTraceContext("00-bad", "")); !errors.Is(err, events.ErrInvalidEvent) {
		t.Errorf("malformed traceparent: err %v, want ErrInvalidEvent", err)
	}
}
