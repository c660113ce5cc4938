package thread_test

import (
	"fmt"
	"testing"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/thread"
	"github.com/artifactr/artifactr/events/memstore"
)

// A run's history and conversation are the newest HistoryWindow entries
// before its prompt, however long the thread: a turn's cost does not grow
// with it.
func TestCore_Decide_historyWindow(t *testing.T) {
	for _, tc := range []struct{ window, want int }{{3, 3}, {-1, 9}} {
		t.Run(fmt.Sprint(tc.window), func(t *testing.T) {
			s := memstore.New(memstore.Config{})
			th := fmt.Sprintf("window%d", tc.window)
			d := newDriver(t, s, th, thread.Config{Agent: "echo", HistoryWindow: tc.window})
			for i := range 9 {
				d.post(fmt.Sprintf("m%d", i))
				d.input(thread.RunFinished{RunID: d.starts[len(d.starts)-1].RunID, Output: fmt.Sprintf("reply %d", i)})
			}
			d.post("last")
			hist, conv := d.history(len(d.starts) - 1)
			last := struct{ History, Conversation []agent.Message }{hist, conv}
			if len(last.History) != tc.want || last.History[len(last.History)-1].Text != "m8" {
				t.Fatalf("history %+v, want the newest %d messages", last.History, tc.want)
			}
			if got := len(last.Conversation); got != min(2*tc.want, 18) && tc.window < 0 || tc.window > 0 && got != tc.window {
				t.Fatalf("conversation of %d entries %+v", got, last.Conversation)
			}
			if c := last.Conversation[len(last.Conversation)-1]; c.Text != "reply 8" {
				t.Fatalf("the conversation ends with %+v, want the newest reply", c)
			}
		})
	}
}
