package events

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events/internal/unfence"
)

// TestCheckAppend_unfencedRefused: a consuming append without the fence is
// refused in a process where the test helpers never switched the unfenced
// mode on, as in every production binary. (Nothing in this package's tests
// calls unfence.Allow.)
func TestCheckAppend_unfencedRefused(t *testing.T) {
	if unfence.Allowed() {
		t.Fatal("unfenced mode is on in events' own tests; nothing here may switch it on")
	}
	c := Claim{Thread: "t1", Holder: "h", Seq: 3}
	ev := NewRunStarted(c, time.Unix(1, 0), "r1", 1, "echo")
	_, err := CheckAppend(ev, Check{Mode: CheckUnfencedForTest, Seq: c.Seq}, nil)
	if !errors.Is(err, ErrInvalidEvent) || !strings.Contains(err.Error(), "only be switched off in tests") {
		t.Fatalf("CheckAppend unfenced = %v, want ErrInvalidEvent naming the tests", err)
	}
	if _, err := CheckAppend(ev, Fenced(c), nil); err != nil {
		t.Fatalf("CheckAppend fenced = %v", err)
	}
}

type lastSeqs map[Kind]uint64

func (l lastSeqs) LastSeq(_ context.Context, thread string, k Kind) (uint64, error) {
	if thread != "t1" {
		return 0, errors.New("unknown thread")
	}
	return l[k], nil
}

func TestThreadLastSeq(t *testing.T) {
	for _, tc := range []struct {
		seqs lastSeqs
		want uint64
	}{
		{lastSeqs{}, 0},
		{lastSeqs{KindPosted: 7, KindClaim: 2, KindRun: 5}, 7},
		{lastSeqs{KindPosted: 1, KindClaim: 9, KindRun: 5}, 9},
		{lastSeqs{KindPosted: 1, KindClaim: 2, KindRun: 11}, 11},
	} {
		got, err := ThreadLastSeq(context.Background(), tc.seqs, "t1")
		if err != nil || got != tc.want {
			t.Errorf("ThreadLastSeq(%v) = %d, %v; want %d", tc.seqs, got, err, tc.want)
		}
	}
	if _, err := ThreadLastSeq(context.Background(), lastSeqs{}, "t2"); err == nil {
		t.Error("ThreadLastSeq passed an error over")
	}
}
