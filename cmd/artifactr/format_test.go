package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/projections"
)

func TestFormatEvent_types(t *testing.T) {
	c := events.Claim{Thread: "t1", Holder: "r1/ab", Seq: 7}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		ev   *eventspb.Event
		want string
	}{
		{&eventspb.Event{Thread: "t1", Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: "m1", Author: "ann", Text: "hi"}}},
			`t1 message_posted id=m1 author="ann" text="hi"`},
		{&eventspb.Event{Thread: "t1", Body: &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{Holder: "r1/ab", LeaseRevision: 3, LeaseTtlMs: 2000}}},
			"t1 thread_claimed claim=12 holder=r1/ab lease_rev=3 ttl=2s"},
		{events.NewRunStarted(c, now, "run-5-7", 5, "echo"), "t1 run_started run=run-5-7 prompt=5 claim=7 holder=r1/ab agent=echo"},
		{events.NewRunOutput(c, now, "run-5-7", "out"), `run_output run=run-5-7 text="out"`},
		{events.NewRequestOpened(c, now, "run-5-7", "q1", "why?"), `request_opened run=run-5-7 request=q1 question="why?"`},
		{events.NewAnswerGiven(c, now, "run-5-7", "q1", 9), "answer_given run=run-5-7 request=q1 message=9 claim=7"},
		{events.NewSteeringGiven(c, now, "run-5-7", 9), "steering_given run=run-5-7 message=9 claim=7"},
		{events.NewRunCompleted(c, now, "run-5-7", "done"), `run_completed run=run-5-7 output="done"`},
		{events.NewRunFailed(c, now, "run-5-7", "boom"), `run_failed run=run-5-7 reason="boom"`},
		{events.NewRunAbandoned(c, now, "run-5-7", 4, "taken over"), `run_abandoned run=run-5-7 started_claim=4 claim=7 holder=r1/ab reason="taken over"`},
	}
	for _, tc := range cases {
		env := events.Envelope{Seq: 12, Thread: "t1", Type: events.TypeOf(tc.ev), Stored: now, Event: tc.ev}
		if got := formatEvent(env); !strings.Contains(got, tc.want) {
			t.Errorf("formatEvent = %q, want it to contain %q", got, tc.want)
		}
	}
	bad := events.Envelope{Seq: 3, Thread: "t1", Err: errors.New("undecodable payload")}
	if got := formatEvent(bad); !strings.Contains(got, `malformed="undecodable payload"`) {
		t.Errorf("malformed: %q", got)
	}
	long := formatEvent(events.Envelope{Seq: 1, Thread: "t1", Event: events.NewRunOutput(c, now, "r", strings.Repeat("x", 500))})
	if len(long) > 200 {
		t.Errorf("a long text is not cut: %d bytes", len(long))
	}
}

func TestToJSON_shape(t *testing.T) {
	c := events.Claim{Thread: "t1", Holder: "r1/ab", Seq: 7}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	env := events.Envelope{Seq: 12, Subject: "threads.t1.run", Thread: "t1", Type: events.TypeRunStarted, MsgID: "t1:7:1",
		Stored: now, Event: events.NewRunStarted(c, now, "run-5-7", 5, "echo")}
	data, err := json.Marshal(toJSON(env))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"seq", "subject", "thread", "type", "time", "event_time", "claim_seq", "holder", "msg_id", "body"} {
		if _, ok := got[k]; !ok {
			t.Errorf("no %q in %s", k, data)
		}
	}
	body, _ := got["body"].(map[string]any)
	if body["run_id"] != "run-5-7" || body["prompt_seq"] != "5" || body["agent"] != "echo" {
		t.Errorf("body %v", body)
	}
	bad, _ := json.Marshal(toJSON(events.Envelope{Seq: 3, Err: errors.New("bad")}))
	if !strings.Contains(string(bad), `"body":null`) || !strings.Contains(string(bad), `"error":"bad"`) {
		t.Errorf("malformed event as JSON: %s", bad)
	}
}

func TestParseAt(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	early := events.Envelope{Seq: 3, Stored: at.Add(-time.Second)}
	late := events.Envelope{Seq: 9, Stored: at.Add(time.Second)}
	for _, tc := range []struct {
		at          string
		early, late bool
	}{
		{"", true, true},
		{"5", true, false},
		{"9", true, true},
		{at.Format(time.RFC3339), true, false},
		{at.Add(time.Hour).Format(time.RFC3339Nano), true, true},
	} {
		keep, err := parseAt(tc.at)
		if err != nil {
			t.Fatalf("parseAt(%q): %v", tc.at, err)
		}
		if keep(early) != tc.early || keep(late) != tc.late {
			t.Errorf("parseAt(%q): keeps early %v late %v", tc.at, keep(early), keep(late))
		}
	}
	if _, err := parseAt("yesterday"); err == nil {
		t.Error("parseAt(yesterday) did not fail")
	}
}

func TestParseFrom(t *testing.T) {
	for in, want := range map[string]uint64{"new": 0, "all": 1, "42": 42} {
		if got, err := parseFrom(in); err != nil || got != want {
			t.Errorf("parseFrom(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "-1", "soon"} {
		if _, err := parseFrom(in); err == nil {
			t.Errorf("parseFrom(%q) did not fail", in)
		}
	}
}

func TestWriteSummaries_status(t *testing.T) {
	c := events.Claim{Thread: "t1", Holder: "r1/ab", Seq: 2}
	now := time.Now()
	mk := func(seq uint64, ev *eventspb.Event) events.Envelope {
		return events.Envelope{Seq: seq, Thread: "t1", Kind: events.TypeOf(ev).Kind(), Type: events.TypeOf(ev), Stored: now, Event: ev}
	}
	envs := []events.Envelope{
		mk(1, &eventspb.Event{Thread: "t1", Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: "m1", Text: "ask: q"}}}),
		mk(2, &eventspb.Event{Thread: "t1", Holder: "r1/ab", Body: &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{Holder: "r1/ab"}}}),
		mk(3, events.NewRunStarted(c, now, "run-1-2", 1, "echo")),
		mk(4, events.NewRequestOpened(c, now, "run-1-2", "q1", "q")),
		mk(5, &eventspb.Event{Thread: "t1", Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: "m2", Text: "later"}}}),
	}
	s := summarize(projections.Fold("t1", envs))
	if s.Status != statusWaiting || s.ActiveRun != "run-1-2" || s.Pending != 1 || s.Holder != "r1/ab" {
		t.Errorf("summary %+v", s)
	}
	var b strings.Builder
	if err := writeSummaries(&b, []threadSummary{s}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "r1/ab (lapsed)") || !strings.Contains(b.String(), "waiting") {
		t.Errorf("table:\n%s", b.String())
	}
	s.LeaseLive = true
	b.Reset()
	_ = writeSummaries(&b, []threadSummary{s})
	if strings.Contains(b.String(), "lapsed") {
		t.Errorf("a live lease shown lapsed:\n%s", b.String())
	}
}
