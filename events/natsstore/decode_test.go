package natsstore

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// decodeStore is a store value with only what decode needs.
var decodeStore = &Store{subj: events.Subjects{}}

// sameEnvelope fails t unless the fast decoder's envelope equals
// events.Decode's: every field, the event by proto.Equal, the error by text.
func sameEnvelope(t testing.TB, subject string, h events.Header, data []byte) (fast bool) {
	t.Helper()
	stored := time.Unix(1_800_000_000, 123)
	got := decodeStore.decode(subject, 42, stored, h, data)
	want := events.Decode(events.Subjects{}, subject, 42, stored, h, data)
	_, fast = decodeStore.decodeFast(subject, 42, stored, h, data)
	if !proto.Equal(got.Event, want.Event) || (got.Event == nil) != (want.Event == nil) {
		t.Fatalf("event differs (fast %v):\n got %v\nwant %v", fast, got.Event, want.Event)
	}
	if fmt.Sprint(got.Err) != fmt.Sprint(want.Err) {
		t.Fatalf("error differs (fast %v): got %v, want %v", fast, got.Err, want.Err)
	}
	got.Event, want.Event, got.Err, want.Err = nil, nil, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("envelope differs (fast %v):\n got %+v\nwant %+v", fast, got, want)
	}
	return fast
}

// randomEvent makes an event of a random type with random fields, some
// empty, some long, some not UTF-8.
func randomEvent(r *rand.Rand) *eventspb.Event {
	str := func() string {
		switch r.IntN(5) {
		case 0:
			return ""
		case 1:
			return "héllo wörld ✓"
		}
		b := make([]byte, r.IntN(300))
		for i := range b {
			b[i] = byte('a' + r.IntN(26))
		}
		return string(b)
	}
	u := func() uint64 {
		if r.IntN(4) == 0 {
			return 0
		}
		return r.Uint64() >> r.IntN(64)
	}
	ev := &eventspb.Event{Thread: "T", ClaimSeq: u(), Holder: str()}
	if r.IntN(5) > 0 {
		ev.Time = timestamppb.New(time.Unix(int64(u()>>34), int64(r.IntN(1e9))))
	}
	switch r.IntN(15) {
	case 0:
		ev.Body = &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: str(), Author: str(), Text: str()}}
	case 1:
		ev.Body = &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{Holder: str(), LeaseRevision: u(), LeaseTtlMs: -int64(u() >> 1)}}
	case 2:
		ev.Body = &eventspb.Event_ThreadReleased{ThreadReleased: &eventspb.ThreadReleased{Holder: str(), Reason: str()}}
	case 3:
		ev.Body = &eventspb.Event_RunStarted{RunStarted: &eventspb.RunStarted{RunId: str(), PromptSeq: u(), Agent: str()}}
	case 4:
		ev.Body = &eventspb.Event_RunOutput{RunOutput: &eventspb.RunOutput{RunId: str(), Text: str()}}
	case 5:
		ev.Body = &eventspb.Event_RequestOpened{RequestOpened: &eventspb.RequestOpened{RunId: str(), RequestId: str(), Question: str()}}
	case 6:
		ev.Body = &eventspb.Event_AnswerGiven{AnswerGiven: &eventspb.AnswerGiven{RunId: str(), RequestId: str(), MessageSeq: u()}}
	case 7:
		ev.Body = &eventspb.Event_SteeringGiven{SteeringGiven: &eventspb.SteeringGiven{RunId: str(), MessageSeq: u()}}
	case 8:
		ev.Body = &eventspb.Event_RunCompleted{RunCompleted: &eventspb.RunCompleted{RunId: str(), Output: str()}}
	case 9:
		ev.Body = &eventspb.Event_RunFailed{RunFailed: &eventspb.RunFailed{RunId: str(), Reason: str()}}
	case 10:
		ev.Body = &eventspb.Event_RunAbandoned{RunAbandoned: &eventspb.RunAbandoned{RunId: str(), StartedClaimSeq: u(), Reason: str()}}
	case 11:
		ev.Body = &eventspb.Event_ThreadConfigured{ThreadConfigured: &eventspb.ThreadConfigured{Strategy: str()}}
	case 12:
		ev.Body = &eventspb.Event_CancelRequested{CancelRequested: &eventspb.CancelRequested{RunId: str(), RequestId: str()}}
	case 13:
		ev.Body = &eventspb.Event_RunInterrupted{RunInterrupted: &eventspb.RunInterrupted{RunId: str(), MessageSeq: u(), Rollback: r.IntN(2) == 0}}
	}
	return ev
}

// mutate damages data the ways stored bytes can be wrong: truncated, a
// flipped byte, an unknown or repeated field appended, or nothing.
func mutate(r *rand.Rand, data []byte) []byte {
	data = append([]byte(nil), data...)
	switch r.IntN(8) {
	case 0:
		if len(data) > 0 {
			return data[:r.IntN(len(data))]
		}
	case 1:
		if len(data) > 0 {
			data[r.IntN(len(data))] ^= byte(1 << r.IntN(8))
		}
	case 2: // an unknown field, as a newer schema would add
		data = protowire.AppendTag(data, protowire.Number(21+r.IntN(100)), protowire.VarintType)
		return protowire.AppendVarint(data, 7)
	case 3: // claim_seq again: proto keeps the last
		data = protowire.AppendTag(data, 3, protowire.VarintType)
		return protowire.AppendVarint(data, 99)
	case 4: // a second body: proto keeps the last
		data = protowire.AppendTag(data, 14, protowire.BytesType)
		return protowire.AppendBytes(data, nil)
	}
	return data
}

// Strings that are not UTF-8 make proto.Unmarshal fail, so they leave the
// fast path: in the event and in its body.
func TestDecode_invalidUTF8(t *testing.T) {
	bad := []byte("\xff\xfe not utf-8")
	h := events.Header{events.HeaderType: {string(events.TypeRunOutput)}}
	base := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("T"))
	body := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("r1"))
	body = protowire.AppendBytes(protowire.AppendTag(body, 2, protowire.BytesType), bad)
	inBody := protowire.AppendBytes(protowire.AppendTag(append([]byte(nil), base...), 14, protowire.BytesType), body)
	okBody := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("r1"))
	inHolder := protowire.AppendBytes(protowire.AppendTag(append([]byte(nil), base...), 4, protowire.BytesType), bad)
	inHolder = protowire.AppendBytes(protowire.AppendTag(inHolder, 14, protowire.BytesType), okBody)
	for _, data := range [][]byte{inBody, inHolder} {
		if sameEnvelope(t, "threads.T.run", h, data) {
			t.Fatal("invalid UTF-8 took the fast path")
		}
	}
	good := protowire.AppendBytes(protowire.AppendTag(append([]byte(nil), base...), 14, protowire.BytesType), okBody)
	if !sameEnvelope(t, "threads.T.run", h, good) {
		t.Fatal("the valid control took the slow path")
	}
}

// The fast decoder agrees with events.Decode on random events, damaged
// bytes, and subjects and headers that contradict the body; and it takes
// the fast path for every well-formed event.
func TestDecode_matchesEventsDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fast, total := 0, 0
	for range 20_000 {
		ev := randomEvent(r)
		data, err := proto.MarshalOptions{Deterministic: true}.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		typ := events.TypeOf(ev)
		kind := typ.Kind()
		if kind == "" {
			kind = events.KindRun
		}
		subject := "threads.T." + string(kind)
		h := events.Header{events.HeaderType: {string(typ)}, events.HeaderSchema: {events.SchemaVersion}}
		switch r.IntN(10) {
		case 0:
			subject = "threads.U." + string(kind) // another thread's subject
		case 1:
			subject = "threads.T.claim" // maybe the wrong kind
		case 2:
			h[events.HeaderType] = []string{"run_output"}
		case 3:
			h[events.HeaderExpectSeq] = []string{"12x"}
		case 4:
			h[events.HeaderExpectSeq] = []string{strconv.Itoa(r.IntN(100))}
			h[events.HeaderExpectSubj] = []string{"threads.T.claim"}
			h[events.HeaderMsgID] = []string{"T:m1"}
		case 5:
			delete(h, events.HeaderType)
		case 6:
			subject = "threads.bad id." + string(kind)
		}
		if r.IntN(3) == 0 {
			data = mutate(r, data)
		}
		total++
		if sameEnvelope(t, subject, h, data) {
			fast++
		}
	}
	if fast < total/4 {
		t.Errorf("fast path taken for %d of %d events", fast, total)
	}
	t.Logf("fast path taken for %d of %d", fast, total)
	// Every well-formed event that agrees with its subject is fast.
	for range 1000 {
		ev := randomEvent(r)
		if events.TypeOf(ev) == "" {
			continue
		}
		ev.Holder = "h"
		data, h, err := events.Encode(ev)
		if err != nil {
			continue // not UTF-8: Encode refuses it too
		}
		if !sameEnvelope(t, "threads.T."+string(events.TypeOf(ev).Kind()), h, data) {
			t.Fatalf("well-formed %v took the slow path", ev)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for i := range 20 {
		data, _ := proto.Marshal(randomEvent(rand.New(rand.NewPCG(uint64(i), 0))))
		f.Add("threads.T.run", "run_output", data)
	}
	f.Add("threads.T.posted", "", []byte{0x0a, 0x01, 'T', 0x52, 0x00})
	f.Fuzz(func(t *testing.T, subject, typ string, data []byte) {
		sameEnvelope(t, subject, events.Header{events.HeaderType: {typ}}, data)
	})
}

// BenchmarkDecode compares the fast decoder with events.Decode on a
// realistic run_output.
func BenchmarkDecode(b *testing.B) {
	ev := &eventspb.Event{Thread: "bench-00042", Time: timestamppb.Now(), ClaimSeq: 123456, Holder: "runner-1-ab12/0123456789ab",
		Body: &eventspb.Event_RunOutput{RunOutput: &eventspb.RunOutput{RunId: "run-bench-00042-00017", Text: string(make([]byte, 180))}}}
	data, h, err := events.Encode(ev)
	if err != nil {
		b.Fatal(err)
	}
	h[events.HeaderExpectSeq] = []string{"123460"}
	stored := time.Now()
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if env := decodeStore.decode("threads.bench-00042.run", 1, stored, h, data); env.Err != nil {
				b.Fatal(env.Err)
			}
		}
	})
	b.Run("events.Decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if env := events.Decode(events.Subjects{}, "threads.bench-00042.run", 1, stored, h, data); env.Err != nil {
				b.Fatal(env.Err)
			}
		}
	})
}
