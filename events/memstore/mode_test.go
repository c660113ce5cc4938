package memstore

import (
	"testing"

	"github.com/artifactr/artifactr/events"
)

// The order of deduplication and check, as the store's own retries cannot
// hide it: a repeat of a stored message id whose check no longer holds is
// a duplicate on a replicated log and a refusal on a single server.
func TestLog_write_modeOrder(t *testing.T) {
	for _, tc := range []struct {
		mode    Mode
		refused bool
	}{{Replicated, false}, {Single, true}} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			s := NewLogWith(LogConfig{Mode: tc.mode}).Open(Config{})
			h := events.Header{events.HeaderMsgID: {"T:1"}}
			first, err := s.write("append", "threads.T.run", h, []byte("x"), check{subject: "threads.T.run"})
			if err != nil {
				t.Fatal(err)
			}
			again, err := s.write("append", "threads.T.run", h, []byte("x"), check{subject: "threads.T.run"})
			if got := isRefusal(err); got != tc.refused {
				t.Fatalf("repeat: ack %+v err %v; refused %v, want %v", again, err, got, tc.refused)
			}
			if !tc.refused && (!again.Duplicate || again.Seq != first.Seq) {
				t.Fatalf("repeat: %+v, want a duplicate of %d", again, first.Seq)
			}
			// With the check holding, both modes deduplicate.
			again, err = s.write("append", "threads.T.run", h, []byte("x"), check{subject: "threads.T.run", want: first.Seq})
			if err != nil || !again.Duplicate || again.Seq != first.Seq {
				t.Fatalf("repeat with a holding check: %+v %v, want a duplicate", again, err)
			}
		})
	}
}
