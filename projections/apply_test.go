package projections

import (
	"errors"
	"strings"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/eventgen"
)

// scene is the usual start of a case: two messages posted to T, then a claim.
type scene struct {
	l      *eventgen.Log
	w      eventgen.Writer // the holder, with its claim_seq
	m1, m2 uint64
}

func newScene() *scene {
	s := &scene{l: eventgen.NewLog()}
	p := eventgen.Writer{Thread: "T"}
	s.m1 = s.l.Post(p.Post("a", "first")).Seq
	s.m2 = s.l.Post(p.Post("b", "second")).Seq
	s.w = eventgen.Writer{Thread: "T", Holder: "h1"}
	s.w.ClaimSeq = s.l.CAS(s.w.Claimed(7)).Seq
	return s
}

// started is newScene plus run r1 prompted by m1.
func started() *scene {
	s := newScene()
	s.l.Fenced(s.w.Started("r1", s.m1))
	return s
}

// opened is started plus request q1 of r1.
func opened() *scene {
	s := started()
	s.l.CAS(s.w.Opened("r1", "q1"))
	return s
}

type wantAnomaly struct {
	seq    uint64
	reason string // a substring of the reason
}

func TestThread_Apply(t *testing.T) {
	tests := []struct {
		name  string
		build func() *scene
		want  []wantAnomaly
		check func(t *testing.T, s *scene, th *Thread)
	}{{
		name:  "message_posted",
		build: newScene,
		check: func(t *testing.T, s *scene, th *Thread) {
			want := Message{Seq: 1, MessageID: "a", Author: "person", Text: "first", Posted: eventgen.Stored(1)}
			if len(th.Messages) != 2 || th.Messages[0] != want {
				t.Errorf("Messages = %+v, want [%+v ...]", th.Messages, want)
			}
			if p := th.Pending(); len(p) != 2 || p[0].Seq != s.m1 {
				t.Errorf("Pending = %+v, want both messages", p)
			}
			if th.LastActivity != eventgen.Stored(3) {
				t.Errorf("LastActivity = %v, want the claim's stored time", th.LastActivity)
			}
		},
	}, {
		name:  "thread_claimed",
		build: newScene,
		check: func(t *testing.T, s *scene, th *Thread) {
			want := Claim{Holder: "h1", Seq: 3, LeaseRevision: 7}
			if th.Claim != want || th.LastClaimSubjectSeq != 3 {
				t.Errorf("Claim = %+v, LastClaimSubjectSeq = %d, want %+v, 3", th.Claim, th.LastClaimSubjectSeq, want)
			}
		},
	}, {
		name: "thread_released",
		build: func() *scene {
			s := newScene()
			s.l.CAS(s.w.Released())
			return s
		},
		check: func(t *testing.T, s *scene, th *Thread) {
			if !th.Claim.Released || th.LastClaimSubjectSeq != 4 {
				t.Errorf("Claim = %+v, LastClaimSubjectSeq = %d; want released, 4", th.Claim, th.LastClaimSubjectSeq)
			}
		},
	}, {
		name: "thread_released_staleClaim",
		build: func() *scene {
			s := newScene()
			b := eventgen.Writer{Thread: "T", Holder: "h2"}
			b.ClaimSeq = s.l.CAS(b.Claimed(8)).Seq
			s.l.CAS(s.w.Released()) // h1 releases its old claim 3
			return s
		},
		want: []wantAnomaly{{5, "release of claim 3, but the newest claim is 4"}},
		check: func(t *testing.T, s *scene, th *Thread) {
			if th.Claim.Released || th.Claim.Holder != "h2" || th.LastClaimSubjectSeq != 5 {
				t.Errorf("Claim = %+v, LastClaimSubjectSeq = %d; want h2's, unreleased, 5", th.Claim, th.LastClaimSubjectSeq)
			}
		},
	}, {
		name: "thread_released_twice",
		build: func() *scene {
			s := newScene()
			s.l.CAS(s.w.Released())
			s.l.CAS(s.w.Released())
			return s
		},
		want: []wantAnomaly{{5, "already released"}},
	}, {
		name:  "run_started",
		build: started,
		check: func(t *testing.T, s *scene, th *Thread) {
			r := th.ActiveRun
			want := Run{ID: "r1", PromptSeq: 1, StartSeq: 4, ClaimSeq: 3, Holder: "h1", Agent: "echo", Status: RunActive}
			if r == nil || len(th.Runs) != 1 || th.Runs[0] != r || r.ID != want.ID || r.PromptSeq != want.PromptSeq ||
				r.StartSeq != want.StartSeq || r.ClaimSeq != want.ClaimSeq || r.Holder != want.Holder || r.Status != want.Status {
				t.Fatalf("ActiveRun = %+v, Runs = %v; want %+v", r, th.Runs, want)
			}
			if c := th.Messages[0].Consumed; c == nil || *c != (Consumption{ConsumedPrompt, "r1", 4}) {
				t.Errorf("prompt Consumed = %+v", c)
			}
			if m, ok := th.OldestPending(); th.Taken != 1 || !ok || m.Seq != s.m2 || th.LastRunSubjectSeq != 4 {
				t.Errorf("Taken = %d, OldestPending = %d %v, LastRunSubjectSeq = %d; want 1, 2, 4", th.Taken, m.Seq, ok, th.LastRunSubjectSeq)
			}
		},
	}, {
		// Spec: I3_OneActiveRun. The state follows the log.
		name: "run_started_whileActive",
		build: func() *scene {
			s := started()
			s.l.Fenced(s.w.Started("r2", s.m2))
			return s
		},
		want: []wantAnomaly{{5, `I3: run "r2" started while run "r1", started at 4, is active`}},
		check: func(t *testing.T, s *scene, th *Thread) {
			if th.ActiveRun == nil || th.ActiveRun.ID != "r2" || len(th.Runs) != 2 || th.Taken != 2 {
				t.Errorf("ActiveRun = %+v, %d runs, Taken %d; want r2, 2, 2", th.ActiveRun, len(th.Runs), th.Taken)
			}
		},
	}, {
		// Spec: I1_ConsumedAtMostOnce.
		name: "run_started_consumedPrompt",
		build: func() *scene {
			s := started()
			s.l.CAS(s.w.Completed("r1"))
			s.l.Fenced(s.w.Started("r2", s.m1))
			return s
		},
		want: []wantAnomaly{{6, "I1: message 1 was already consumed at 4"}},
		check: func(t *testing.T, s *scene, th *Thread) {
			if c := th.Messages[0].Consumed; c.RunID != "r1" || th.ActiveRun.ID != "r2" {
				t.Errorf("Consumed = %+v, ActiveRun = %q; want the first consumption to stand and r2 active", c, th.ActiveRun.ID)
			}
		},
	}, {
		name: "run_started_unknownPrompt",
		build: func() *scene {
			s := newScene()
			s.l.Fenced(s.w.Started("r1", 3)) // 3 is the claim marker
			return s
		},
		want: []wantAnomaly{{4, "prompt names message 3, which was not posted"}},
		check: func(t *testing.T, s *scene, th *Thread) {
			if th.ActiveRun == nil || th.Taken != 0 {
				t.Errorf("ActiveRun = %+v, Taken = %d; want r1 active, nothing taken", th.ActiveRun, th.Taken)
			}
		},
	}, {
		name: "run_started_notOldest",
		build: func() *scene {
			s := newScene()
			s.l.Fenced(s.w.Started("r1", s.m2))
			return s
		},
		want: []wantAnomaly{{4, "message 2 is not the oldest pending message"}},
		check: func(t *testing.T, s *scene, th *Thread) {
			// m2 alone is consumed: m1 stays pending, or no runner would
			// ever take it (issue 23's stranding), and the cursor stays.
			p := th.Pending()
			if m, ok := th.OldestPending(); th.Taken != 0 || th.Messages[1].Consumed == nil || len(p) != 1 || p[0].Seq != s.m1 || !ok || m.Seq != s.m1 {
				t.Errorf("Taken = %d, Pending = %v, OldestPending = %v %v; want 0, m1, m1", th.Taken, p, m, ok)
			}
		},
	}, {
		// Taking the stranded message moves the cursor past both.
		name: "run_started_notOldestThenOldest",
		build: func() *scene {
			s := newScene()
			s.l.Fenced(s.w.Started("r1", s.m2))
			s.l.CAS(s.w.Completed("r1"))
			s.l.Fenced(s.w.Started("r2", s.m1))
			return s
		},
		want: []wantAnomaly{{4, "message 2 is not the oldest pending message"}},
		check: func(t *testing.T, s *scene, th *Thread) {
			if th.Taken != s.m2 || len(th.Pending()) != 0 || th.Messages[0].Consumed.RunID != "r2" {
				t.Errorf("Taken = %d, Pending = %v, m1 %+v; want %d, none, taken by r2", th.Taken, th.Pending(), th.Messages[0].Consumed, s.m2)
			}
		},
	}, {
		name: "run_output",
		build: func() *scene {
			s := started()
			s.l.CAS(s.w.Output("r1", "hi"))
			s.l.CAS(s.w.Output("r9", "lost"))
			return s
		},
		want: []wantAnomaly{{6, `run "r9" is not the active run "r1"`}},
		check: func(t *testing.T, s *scene, th *Thread) {
			if got := th.ActiveRun.Outputs; len(got) != 1 || got[0] != "hi" || th.LastRunSubjectSeq != 6 {
				t.Errorf("Outputs = %q, LastRunSubjectSeq = %d", got, th.LastRunSubjectSeq)
			}
		},
	}, {
		name: "request_opened",
		build: func() *scene {
			s := opened()
			s.l.CAS(s.w.Opened("r1", "q1"))
			return s
		},
		want: []wantAnomaly{{6, `request "q1" was already opened at 5`}},
		check: func(t *testing.T, s *scene, th *Thread) {
			q := th.Requests["q1"]
			want := Request{ID: "q1", RunID: "r1", Question: "which?", OpenedSeq: 5}
			if q == nil || *q != want || len(th.ActiveRun.Requests) != 1 {
				t.Errorf("Requests[q1] = %+v, run requests %q; want %+v once", q, th.ActiveRun.Requests, want)
			}
			if open := th.OpenRequests(); len(open) != 1 || open[0] != q {
				t.Errorf("OpenRequests = %v", open)
			}
		},
	}, {
		name: "request_opened_noActiveRun",
		build: func() *scene {
			s := newScene()
			s.l.CAS(s.w.Opened("r1", "q1"))
			return s
		},
		want: []wantAnomaly{{4, `run "r1" is not active: no run is`}},
		check: func(t *testing.T, s *scene, th *Thread) {
			if len(th.Requests) != 0 {
				t.Errorf("Requests = %v, want none", th.Requests)
			}
		},
	}, {
		name: "answer_given",
		build: func() *scene {
			s := opened()
			s.l.Fenced(s.w.Answer("r1", "q1", s.m2))
			return s
		},
		check: func(t *testing.T, s *scene, th *Thread) {
			q := th.Requests["q1"]
			if !q.Answered || q.AnswerSeq != 6 || q.MessageSeq != s.m2 || len(th.OpenRequests()) != 0 {
				t.Errorf("request = %+v; want answered at 6 by message 2", q)
			}
			if c := th.Messages[1].Consumed; c == nil || *c != (Consumption{ConsumedAnswer, "r1", 6}) || th.Taken != 2 {
				t.Errorf("Consumed = %+v, Taken = %d", c, th.Taken)
			}
		},
	}, {
		// Spec: AnswerOnce. The second answer's message is still consumed.
		name: "answer_given_twice",
		build: func() *scene {
			s := opened()
			s.l.Fenced(s.w.Answer("r1", "q1", s.m2))
			m3 := s.l.Post(eventgen.Writer{Thread: "T"}.Post("c", "third")).Seq
			s.l.Fenced(s.w.Answer("r1", "q1", m3))
			return s
		},
		want: []wantAnomaly{{8, `request "q1" was already answered at 6`}},
		check: func(t *testing.T, s *scene, th *Thread) {
			if q := th.Requests["q1"]; q.AnswerSeq != 6 || th.Messages[2].Consumed == nil {
				t.Errorf("request = %+v, third message %+v; want the first answer to stand, the message consumed", q, th.Messages[2])
			}
		},
	}, {
		name: "answer_given_unknownRequest",
		build: func() *scene {
			s := started()
			s.l.Fenced(s.w.Answer("r1", "q9", s.m2))
			return s
		},
		want: []wantAnomaly{{5, `answer to unknown request "q9"`}},
		check: func(t *testing.T, s *scene, th *Thread) {
			if th.Messages[1].Consumed == nil || th.Taken != 2 {
				t.Errorf("message 2 = %+v, Taken %d; want it consumed: a writer handed it out", th.Messages[1], th.Taken)
			}
		},
	}, {
		name: "answer_given_reusedMessage",
		build: func() *scene {
			s := opened()
			s.l.Fenced(s.w.Answer("r1", "q1", s.m1))
			return s
		},
		want: []wantAnomaly{{6, "I1: message 1 was already consumed at 4"}},
	}, {
		name: "answer_given_requestOfEndedRun",
		build: func() *scene {
			s := opened()
			s.l.CAS(s.w.Completed("r1"))
			s.l.Fenced(s.w.Started("r1", s.m2)) // the id reused by a new run
			m3 := s.l.Post(eventgen.Writer{Thread: "T"}.Post("c", "third")).Seq
			s.l.Fenced(s.w.Answer("r1", "q1", m3))
			return s
		},
		want: []wantAnomaly{{9, `answer to unknown request "q1": the active run did not open it`}},
		check: func(t *testing.T, s *scene, th *Thread) {
			if q := th.Requests["q1"]; q.Answered || !q.Closed {
				t.Errorf("request = %+v; want closed, unanswered", q)
			}
		},
	}, {
		name: "steering_given",
		build: func() *scene {
			s := started()
			s.l.Fenced(s.w.Steer("r1", s.m2))
			return s
		},
		check: func(t *testing.T, s *scene, th *Thread) {
			if got := th.ActiveRun.Steering; len(got) != 1 || got[0] != s.m2 || th.Messages[1].Consumed.Kind != ConsumedSteering {
				t.Errorf("Steering = %v, message %+v", got, th.Messages[1])
			}
		},
	}, {
		name: "steering_given_noActiveRun",
		build: func() *scene {
			s := newScene()
			s.l.Fenced(s.w.Steer("r1", s.m1))
			return s
		},
		want: []wantAnomaly{{4, `run "r1" is not active: no run is`}},
		check: func(t *testing.T, s *scene, th *Thread) {
			if th.Messages[0].Consumed == nil || len(th.Runs) != 0 {
				t.Errorf("message 1 = %+v, runs %v; want it consumed and no run", th.Messages[0], th.Runs)
			}
		},
	}, {
		name: "run_completed",
		build: func() *scene {
			s := opened()
			s.l.CAS(s.w.Completed("r1"))
			return s
		},
		check: func(t *testing.T, s *scene, th *Thread) {
			r := th.Runs[0]
			if th.ActiveRun != nil || r.Status != RunCompleted || r.EndSeq != 6 || r.Output != "done" {
				t.Errorf("ActiveRun = %v, run = %+v", th.ActiveRun, r)
			}
			if q := th.Requests["q1"]; !q.Closed || q.Answered || th.OpenRequests() != nil {
				t.Errorf("request = %+v; want closed", q)
			}
		},
	}, {
		name: "run_failed",
		build: func() *scene {
			s := started()
			s.l.CAS(s.w.Failed("r2"))
			s.l.CAS(s.w.Failed("r1"))
			return s
		},
		want: []wantAnomaly{{5, `run "r2" is not the active run "r1"`}},
		check: func(t *testing.T, s *scene, th *Thread) {
			if r := th.Runs[0]; th.ActiveRun != nil || r.Status != RunFailed || r.Reason != "agent error" || r.EndSeq != 6 {
				t.Errorf("run = %+v", r)
			}
		},
	}, {
		name: "run_abandoned",
		build: func() *scene {
			s := opened()
			b := eventgen.Writer{Thread: "T", Holder: "h2"}
			b.ClaimSeq = s.l.CAS(b.Claimed(8)).Seq
			s.l.Fenced(b.Abandoned("r1", s.w.ClaimSeq))
			return s
		},
		check: func(t *testing.T, s *scene, th *Thread) {
			r := th.Runs[0]
			if th.ActiveRun != nil || r.Status != RunAbandoned || r.EndSeq != 7 || r.Reason != "takeover" || !th.Requests["q1"].Closed {
				t.Errorf("run = %+v, request %+v", r, th.Requests["q1"])
			}
		},
	}, {
		name: "run_abandoned_wrongStartedClaim",
		build: func() *scene {
			s := started()
			b := eventgen.Writer{Thread: "T", Holder: "h2"}
			b.ClaimSeq = s.l.CAS(b.Claimed(8)).Seq
			s.l.Fenced(b.Abandoned("r1", 99))
			return s
		},
		want: []wantAnomaly{{6, `run "r1" started under claim 3, not 99`}},
		check: func(t *testing.T, s *scene, th *Thread) {
			if th.ActiveRun != nil || th.Runs[0].Status != RunAbandoned {
				t.Errorf("run = %+v; want abandoned anyway", th.Runs[0])
			}
		},
	}, {
		// Spec: NoEndAfterAbandon. The zombie's end changes nothing.
		name: "run_completed_afterAbandon",
		build: func() *scene {
			s := started()
			b := eventgen.Writer{Thread: "T", Holder: "h2"}
			b.ClaimSeq = s.l.CAS(b.Claimed(8)).Seq
			s.l.Fenced(b.Abandoned("r1", s.w.ClaimSeq))
			s.l.CAS(s.w.Completed("r1"))
			s.l.CAS(s.w.Output("r1", "late"))
			return s
		},
		want: []wantAnomaly{{7, `run "r1" is not active: it was abandoned at 6`}, {8, "abandoned at 6"}},
		check: func(t *testing.T, s *scene, th *Thread) {
			if r := th.Runs[0]; r.Status != RunAbandoned || r.EndSeq != 6 || r.Output != "" || len(r.Outputs) != 0 {
				t.Errorf("run = %+v; want it left as abandoned", r)
			}
		},
	}, {
		name: "garbagePayload",
		build: func() *scene {
			s := newScene()
			s.l.Raw("threads.T.claim", eventgen.Header(events.TypeThreadClaimed), []byte{0xff, 0xff, 0x01})
			s.l.Fenced(s.w.Started("r1", s.m1))
			return s
		},
		want: []wantAnomaly{{4, "undecodable payload"}},
		check: func(t *testing.T, s *scene, th *Thread) {
			// JetStream counts the garbage on the claim subject: the next
			// claim must expect 4.
			if th.LastClaimSubjectSeq != 4 || th.LastSeq != 5 || th.ActiveRun == nil || th.Claim.Seq != 3 {
				t.Errorf("LastClaimSubjectSeq = %d, LastSeq = %d, run %v, claim %+v", th.LastClaimSubjectSeq, th.LastSeq, th.ActiveRun, th.Claim)
			}
		},
	}, {
		name: "typeHeaderMismatch",
		build: func() *scene {
			s := newScene()
			ev := eventgen.Writer{Thread: "T"}.Post("x", "forged")
			s.l.Raw("threads.T.posted", eventgen.Header(events.TypeRunStarted), eventgen.Marshal(ev))
			return s
		},
		want: []wantAnomaly{{4, `header "run_started" names another body`}},
		check: func(t *testing.T, s *scene, th *Thread) {
			if len(th.Messages) != 2 {
				t.Errorf("%d messages; want the forged one not applied", len(th.Messages))
			}
		},
	}, {
		name: "otherThread",
		build: func() *scene {
			s := newScene()
			s.l.Post(eventgen.Writer{Thread: "U"}.Post("u", "elsewhere"))
			return s
		},
		want: []wantAnomaly{{4, `event of thread "U", not "T"`}},
		check: func(t *testing.T, s *scene, th *Thread) {
			if len(th.Messages) != 2 || th.LastSeq != 4 || th.LastActivity != eventgen.Stored(3) {
				t.Errorf("%d messages, LastSeq %d, LastActivity %v", len(th.Messages), th.LastSeq, th.LastActivity)
			}
		},
	}, {
		name: "alreadyApplied",
		build: func() *scene {
			s := started()
			s.l.Repeat(0)
			s.l.Repeat(3)
			return s
		},
		check: func(t *testing.T, s *scene, th *Thread) {
			if len(th.Messages) != 2 || len(th.Runs) != 1 || th.LastSeq != 4 {
				t.Errorf("%d messages, %d runs, LastSeq %d; want repeats skipped", len(th.Messages), len(th.Runs), th.LastSeq)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.build()
			th := Fold("T", s.l.Envs)
			checkAnomalies(t, th, tt.want)
			if tt.check != nil {
				tt.check(t, s, th)
			}
		})
	}
}

func checkAnomalies(t *testing.T, th *Thread, want []wantAnomaly) {
	t.Helper()
	if len(th.Anomalies) != len(want) {
		t.Fatalf("Anomalies = %+v, want %d like %+v", th.Anomalies, len(want), want)
	}
	for i, w := range want {
		if a := th.Anomalies[i]; a.Seq != w.seq || !strings.Contains(a.Reason, w.reason) {
			t.Errorf("Anomalies[%d] = %+v, want seq %d with %q", i, a, w.seq, w.reason)
		}
	}
}

// Hand-made envelopes skip Decode's checks; Apply must still refuse them.
func TestThread_Apply_handMade(t *testing.T) {
	post := eventgen.Writer{Thread: "T"}.Post("a", "x")
	tests := []struct {
		name   string
		env    events.Envelope
		reason string
	}{
		{"nilEvent", events.Envelope{Seq: 1, Thread: "T"}, "no known body"},
		{"noBody", events.Envelope{Seq: 1, Thread: "T", Event: &eventspb.Event{Thread: "T"}}, "no known body"},
		{"nilInnerBody", events.Envelope{Seq: 1, Thread: "T", Event: &eventspb.Event{Thread: "T", Body: &eventspb.Event_RunStarted{}}}, "prompt names message 0"},
		{"eventThread", events.Envelope{Seq: 1, Thread: "T", Event: &eventspb.Event{Thread: "U", Body: post.Body}}, `names thread "U"`},
		{"kind", events.Envelope{Seq: 1, Thread: "T", Kind: events.KindRun, Event: post}, "message_posted event on the run subject"},
		{"typeHeader", events.Envelope{Seq: 1, Thread: "T", Type: events.TypeRunOutput, Event: post}, `"run_output" names another body`},
		{"err", events.Envelope{Seq: 1, Thread: "T", Event: post, Err: errors.New("boom")}, "boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := New("T")
			th.Apply(tt.env)
			if len(th.Anomalies) != 1 || !strings.Contains(th.Anomalies[0].Reason, tt.reason) || th.LastSeq != 1 {
				t.Errorf("Anomalies = %+v, LastSeq %d; want one with %q", th.Anomalies, th.LastSeq, tt.reason)
			}
		})
	}
}

// A zero Thread, not made by New, must not panic either.
func TestThread_Apply_zeroValue(t *testing.T) {
	s := opened()
	th := &Thread{ID: "T"}
	for _, env := range s.l.Envs {
		th.Apply(env)
	}
	if th.Requests["q1"] == nil {
		t.Errorf("Requests = %v, want q1", th.Requests)
	}
}
