package events

import (
	"encoding/json"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/events/eventspb"
)

// EnvelopeJSON is an envelope as JSON: the shape `artifactr watch --json`
// prints and the console's timeline reads. Body is the event's body in
// protobuf's JSON mapping, with the .proto field names.
type EnvelopeJSON struct {
	Seq       uint64          `json:"seq"`
	Subject   string          `json:"subject"`
	Thread    string          `json:"thread"`
	Type      string          `json:"type"`
	Time      time.Time       `json:"time"`
	EventTime *time.Time      `json:"event_time,omitempty"`
	ClaimSeq  uint64          `json:"claim_seq"`
	Holder    string          `json:"holder"`
	MsgID     string          `json:"msg_id"`
	Body      json.RawMessage `json:"body"`
	Error     string          `json:"error,omitempty"`
}

var bodyJSON = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// ToJSON converts env to its JSON shape.
func ToJSON(env Envelope) EnvelopeJSON {
	j := EnvelopeJSON{
		Seq: env.Seq, Subject: env.Subject, Thread: env.Thread, Type: string(env.Type),
		Time: env.Stored.UTC(), MsgID: env.MsgID, Body: json.RawMessage("null"),
	}
	if env.Err != nil {
		j.Error = env.Err.Error()
	}
	ev := env.Event
	if ev == nil {
		return j
	}
	j.ClaimSeq, j.Holder = ev.GetClaimSeq(), ev.GetHolder()
	if ev.GetTime() != nil {
		t := ev.GetTime().AsTime().UTC()
		j.EventTime = &t
	}
	if body := eventBody(ev); body != nil {
		if data, err := bodyJSON.Marshal(body); err == nil {
			j.Body = data
		}
	}
	return j
}

// eventBody returns the message set in ev's body oneof, or nil.
func eventBody(ev *eventspb.Event) proto.Message {
	m := ev.ProtoReflect()
	od := m.Descriptor().Oneofs().ByName("body")
	if od == nil {
		return nil
	}
	fd := m.WhichOneof(od)
	if fd == nil {
		return nil
	}
	return m.Get(fd).Message().Interface()
}
