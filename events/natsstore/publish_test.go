package natsstore

import (
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/artifactr/artifactr/events"
)

// A write's message carries the event's type and schema, the further
// headers, its msg id and its check, each once; messages built from one
// write share no header value another could change.
func TestWrite_msgHeaders(t *testing.T) {
	w := write{
		subject:  "threads.T.run",
		typ:      events.TypeRunStarted,
		header:   nats.Header{events.HeaderTraceParent: {"00-abc-def-01"}},
		data:     []byte("x"),
		msgID:    "T:1",
		jsHeader: expectLastFor(7, "threads.T.claim"),
	}
	m := w.msg()
	want := nats.Header{
		events.HeaderType:        {string(events.TypeRunStarted)},
		events.HeaderSchema:      {events.SchemaVersion},
		events.HeaderTraceParent: {"00-abc-def-01"},
		events.HeaderMsgID:       {"T:1"},
		events.HeaderExpectSeq:   {"7"},
		events.HeaderExpectSubj:  {"threads.T.claim"},
	}
	if !reflect.DeepEqual(m.Header, want) || m.Subject != w.subject || string(m.Data) != "x" {
		t.Fatalf("msg %s %q headers %v, want %v", m.Subject, m.Data, m.Header, want)
	}
	m.Header[events.HeaderMsgID] = append(m.Header[events.HeaderMsgID], "extra")
	m.Header[events.HeaderType][0] = "changed"
	if again := w.msg(); !reflect.DeepEqual(again.Header, want) {
		t.Fatalf("a second msg of the write has headers %v after the first was changed", again.Header)
	}
	kv := write{subject: "$KV.claims.T", msgID: "T:2", jsHeader: expectLast(0)}
	if h := kv.msg().Header; len(h) != 2 || h.Get(events.HeaderType) != "" || h.Get(events.HeaderMsgID) != "T:2" {
		t.Fatalf("a KV write's headers %v, want its msg id and check alone", h)
	}
}
