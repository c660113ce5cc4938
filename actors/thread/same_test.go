package thread

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/eventgen"
)

// TestSameEvent_agreesWithProtoEqual checks sameEvent against proto.Equal
// on the events of a random log, read back against one another: same type,
// other bodies, holders and claims.
func TestSameEvent_agreesWithProtoEqual(t *testing.T) {
	const seed = 7
	t.Logf("seed %d", seed)
	l, _ := eventgen.Random(rand.New(rand.NewPCG(seed, 0)), eventgen.Config{Threads: 3, Events: 300, Faults: 0.2})
	var same, differ int
	for i, a := range l.Envs {
		for _, b := range l.Envs[max(0, i-40) : i+1] {
			if a.Event == nil || b.Event == nil {
				continue
			}
			sent := withoutTime(b.Event)
			want := proto.Equal(withoutTime(a.Event), sent)
			if got := sameEvent(a.Event, sent); got != want {
				t.Fatalf("sameEvent(%v, %v) = %v, proto.Equal says %v", a.Event, sent, got, want)
			}
			if want {
				same++
			} else {
				differ++
			}
		}
	}
	if same == 0 || differ == 0 {
		t.Fatalf("the log gave %d equal and %d unequal pairs; need both", same, differ)
	}
}

func TestSameEvent_fieldChanges(t *testing.T) {
	sent := &eventspb.Event{Thread: "t", ClaimSeq: 3, Holder: "h", Body: &eventspb.Event_RunOutput{RunOutput: &eventspb.RunOutput{RunId: "r", Text: "x"}}}
	for name, change := range map[string]func(*eventspb.Event){
		"thread": func(e *eventspb.Event) { e.Thread = "u" },
		"claim":  func(e *eventspb.Event) { e.ClaimSeq++ },
		"holder": func(e *eventspb.Event) { e.Holder = "g" },
		"body":   func(e *eventspb.Event) { e.GetRunOutput().Text = "y" },
		"kind": func(e *eventspb.Event) {
			e.Body = &eventspb.Event_RunCompleted{RunCompleted: &eventspb.RunCompleted{RunId: "r"}}
		},
		"no body":  func(e *eventspb.Event) { e.Body = nil },
		"unknown":  func(e *eventspb.Event) { e.ProtoReflect().SetUnknown([]byte{0xf8, 0x06, 0x01}) },
		"body unk": func(e *eventspb.Event) { e.GetRunOutput().ProtoReflect().SetUnknown([]byte{0xf8, 0x06, 0x01}) },
	} {
		got := proto.Clone(sent).(*eventspb.Event)
		if !sameEvent(got, sent) {
			t.Fatalf("%s: a copy differs", name)
		}
		change(got)
		if sameEvent(got, sent) {
			t.Errorf("%s: a changed event is the same", name)
		}
	}
}

// TestSameEvent_knowsEveryField fails when Event gains a field outside its
// body that sameEvent does not compare.
func TestSameEvent_knowsEveryField(t *testing.T) {
	known := map[string]bool{"thread": true, "time": true, "claim_seq": true, "holder": true}
	fields := (&eventspb.Event{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.ContainingOneof() == nil && !known[string(fd.Name())] {
			t.Errorf("Event field %s is not compared by sameEvent", fd.Name())
		}
	}
}
