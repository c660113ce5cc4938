package events

import (
	"errors"
	"testing"
	"time"
)

// Under RunFence markers and releases move to the run subject; nothing else
// moves, and the claim layout is as before.
func TestSubjects_KindOf(t *testing.T) {
	all := []Type{TypeMessagePosted, TypeThreadClaimed, TypeThreadReleased, TypeRunStarted, TypeRunOutput,
		TypeAnswerGiven, TypeThreadConfigured, TypeRunInterrupted, TypeThreadDeleted}
	for _, typ := range all {
		if got := (Subjects{}).KindOf(typ); got != typ.Kind() {
			t.Errorf("claim layout: %s on %s, want %s", typ, got, typ.Kind())
		}
		want := typ.Kind()
		if typ == TypeThreadClaimed || typ == TypeThreadReleased {
			want = KindRun
		}
		if got := (Subjects{RunFence: true}).KindOf(typ); got != want {
			t.Errorf("run layout: %s on %s, want %s", typ, got, want)
		}
	}
}

// Readers take a marker from the claim subject or the run subject, and
// nothing else from a subject not its own.
func TestType_StoredOn(t *testing.T) {
	for _, tc := range []struct {
		typ  Type
		k    Kind
		want bool
	}{
		{TypeThreadClaimed, KindClaim, true},
		{TypeThreadClaimed, KindRun, true},
		{TypeThreadReleased, KindRun, true},
		{TypeThreadClaimed, KindPosted, false},
		{TypeRunStarted, KindClaim, false},
		{TypeMessagePosted, KindRun, false},
	} {
		if got := tc.typ.StoredOn(tc.k); got != tc.want {
			t.Errorf("%s on %s: %t, want %t", tc.typ, tc.k, got, tc.want)
		}
	}
}

// Under RunFence an unguarded fence is refused before any I/O; the guarded
// one and the claim layout's unguarded one pass.
func TestSubjects_CheckAppend_runFence(t *testing.T) {
	c := Claim{Thread: "T", Holder: "A", Seq: 3}
	ev := NewRunStarted(c, time.Unix(1, 0), "r1", 1, "a")
	if _, err := (Subjects{RunFence: true}).CheckAppend(ev, Fenced(c), nil); !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("unguarded fence under RunFence: %v, want ErrInvalidEvent", err)
	}
	if _, err := (Subjects{RunFence: true}).CheckAppend(ev, FencedGuarded(c, 5), nil); err != nil {
		t.Fatalf("guarded fence under RunFence: %v", err)
	}
	if _, err := (Subjects{}).CheckAppend(ev, Fenced(c), nil); err != nil {
		t.Fatalf("unguarded fence in the claim layout: %v", err)
	}
}
