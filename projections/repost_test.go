package projections

import (
	"reflect"
	"strings"
	"testing"

	"github.com/artifactr/artifactr/internal/eventgen"
)

// A message id is one message in its thread forever: a second
// message_posted with it is never pending and never a prompt, however
// late it lands; a run that takes it anyway is an anomaly, and the
// snapshot keeps what the fold knows of it.
func TestThread_Apply_repostedID(t *testing.T) {
	l := eventgen.NewLog()
	p := eventgen.Writer{Thread: "T"}
	m1 := l.Post(p.Post("m1", "hello")).Seq
	dup := l.Post(p.Post("m1", "hello")).Seq
	other := l.Post(p.Post("m1", "another text")).Seq
	th := Fold("T", l.Envs)
	if len(th.Messages) != 1 || th.Messages[0].Seq != m1 {
		t.Fatalf("messages %+v, want only %d", th.Messages, m1)
	}
	if th.Reposts[dup] != m1 || th.Reposts[other] != m1 || len(th.Anomalies) != 2 {
		t.Fatalf("reposts %v anomalies %+v", th.Reposts, th.Anomalies)
	}
	if m, ok := th.MessageByID("m1"); !ok || m.Seq != m1 || m.Text != "hello" {
		t.Fatalf("MessageByID: %+v %v", m, ok)
	}
	if got := len(th.Pending()); got != 1 {
		t.Fatalf("%d pending, want 1", got)
	}
	w := eventgen.Writer{Thread: "T", Holder: "h"}
	w.ClaimSeq = l.CAS(w.Claimed(1)).Seq
	l.Fenced(w.Started("r1", dup))
	th = Fold("T", l.Envs)
	last := th.Anomalies[len(th.Anomalies)-1]
	if !strings.Contains(last.Reason, "repost") || th.Messages[0].Consumed != nil {
		t.Fatalf("a run took a repost: anomaly %+v, message %+v", last, th.Messages[0])
	}
	data, err := th.EncodeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeSnapshot("T", data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Reposts, th.Reposts) || back.ids["m1"] != m1 {
		t.Fatalf("snapshot lost reposts or ids: %v %v", back.Reposts, back.ids)
	}
	// The snapshot's fold goes on as the full one does.
	again := l.Post(p.Post("m1", "hello")).Seq
	back.Apply(l.Envs[len(l.Envs)-1])
	if back.Reposts[again] != m1 || len(back.Messages) != 1 {
		t.Fatalf("after the snapshot, a repost became a message: %+v", back.Messages)
	}
}
