package natsstore

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// TestDecode_threadForked: thread_forked, with its nested history, is not
// one of the fast decoder's flat bodies; it decodes as events.Decode does,
// on the posted subject.
func TestDecode_threadForked(t *testing.T) {
	ev := events.NewThreadForked("t2", time.Unix(5, 0), &eventspb.ThreadForked{
		SourceThread: "t1", SourceSeq: 7,
		Messages: []*eventspb.ForkedMessage{{Seq: 1, MessageId: "m1", Text: "hi", Posted: timestamppb.New(time.Unix(1, 0)), ConsumedAs: "prompt", RunId: "r1"}},
		Runs:     []*eventspb.ForkedRun{{RunId: "r1", PromptSeq: 1, Outputs: []string{"a", "b"}, Status: "completed", Output: "ab"}},
	})
	data, h, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	if fast := sameEnvelope(t, "threads.t2.posted", h, data); fast {
		t.Error("the fast decoder took thread_forked")
	}
	env := decodeStore.decode("threads.t2.posted", 42, time.Unix(6, 0), h, data)
	if env.Err != nil || env.Type != events.TypeThreadForked || env.Kind != events.KindPosted || !proto.Equal(env.Event, ev) {
		t.Fatalf("decoded %+v", env)
	}
	if env := decodeStore.decode("threads.t2.run", 42, time.Unix(6, 0), h, data); env.Err == nil {
		t.Error("thread_forked on the run subject decoded without an error")
	}
}
